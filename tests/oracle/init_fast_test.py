#!/usr/bin/env python3
"""lins_torch's fast initialiser (numpy's vectorised log and cos, pieces drawn on every core) against its exact one
(the C library's log and cos, element by element, as lins draws them): the same tensors in the same order, and every
element within one fp32 ulp of the exact value. Exit 77 when numpy is missing."""
import sys

try:
    import numpy as np
except ImportError:
    sys.exit(77)

import lins_torch
from lins_torch import init as linit


def main() -> int:
    cfg = lins_torch.preset("small")
    exact = linit.initial_weights(cfg, 3)
    fast = linit.initial_weights(cfg, 3, exact=False)
    if list(exact) != list(fast):
        print(f"FAIL: tensor order differs: {list(exact)} vs {list(fast)}")
        return 1
    worst, differing = 0.0, 0
    for name, e in exact.items():
        f = fast[name]
        if e.shape != f.shape or e.dtype != f.dtype:
            print(f"FAIL: {name}: {f.shape} {f.dtype}, exact {e.shape} {e.dtype}")
            return 1
        ulps = np.abs(f - e) / np.spacing(np.abs(e))
        worst = max(worst, float(ulps.max()))
        differing += int((f != e).sum())
    total = sum(e.size for e in exact.values())
    print(f"{total} elements, {differing} differ, worst {worst:.2f} ulp")
    if worst > 1.0:
        print("FAIL: an element is more than one fp32 ulp from the exact initialiser")
        return 1
    # A piece boundary (1 << 22 elements) falls inside no tensor of `small`: check the stitching on a stream directly.
    n = (1 << 22) + 1000
    e = linit.normal_stream(12345, (1 << 22) - 500, 1000, 0.02)
    f = np.concatenate([linit.normal_stream(12345, (1 << 22) - 500, 500, 0.02, False),
                        linit.normal_stream(12345, 1 << 22, 500, 0.02, False)])
    if float((np.abs(f - e) / np.spacing(np.abs(e))).max()) > 1.0:
        print(f"FAIL: pieces of a stream are not the stream ({n} elements)")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
