#!/usr/bin/env python3
"""lins_torch's model presets are the binary's (`lins schema`'s models, read through lins_schema): the same names in
the same order with the same shapes, and the parameters lins_torch lays out (tensor_shapes) add up to the binary's
parameter count of each preset. Exit 77 when torch or numpy is missing (lins_torch imports both)."""
import math
import sys

try:
    import numpy  # noqa: F401
    import torch  # noqa: F401
except ImportError as e:
    print(f"skipped: {e}")
    sys.exit(77)

import lins_schema
import lins_torch


def main() -> int:
    failures = []
    if list(lins_torch.PRESETS) != list(lins_schema.MODELS):
        failures.append(f"presets {list(lins_torch.PRESETS)}, the binary's {list(lins_schema.MODELS)}")
    for name, m in lins_schema.MODELS.items():
        cfg = lins_torch.preset(name)
        for field in ("hidden", "layers", "heads", "ffn", "vocab"):
            if getattr(cfg, field) != m[field]:
                failures.append(f"{name}: {field} {getattr(cfg, field)}, the binary's {m[field]}")
        params = sum(math.prod(shape) for _, shape in lins_torch.tensor_shapes(cfg))
        if params != m["params"]:
            failures.append(f"{name}: tensor_shapes hold {params} parameters, the binary's preset {m['params']}")
    for f in failures:
        print(f"FAIL: {f}")
    if not failures:
        print(f"ok: {len(lins_schema.MODELS)} presets, shapes and parameter counts as `lins schema` gives them")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
