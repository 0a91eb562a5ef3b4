"""lins's ZeRO++ quantizers (kernels/quantize.h, through zeropp_quant_cli) against the numpy transcription of
DeepSpeed's kernels (python/lins_peers/zeropp_quant.py) on random and edge blocks: payload bytes, scales and
dequantized values equal to the bit (a NaN equals any NaN), the qwZ block count and qgZ's shape rules equal, and qgZ
end to end (lins's three steps with the all-to-alls as copies against DeepSpeed's all_to_all_quant_reduce emulated)
equal on every rank. Both sides use IEEE arithmetic; where DeepSpeed's --use_fast_math divisions can differ by an ulp
is documented in docs/engines.md, not tested here.

Usage: zeropp_quant_peer_test.py <zeropp_quant_cli>. Exit 0 pass, 1 fail, 77 skipped (no numpy)."""

import os
import subprocess
import sys
import tempfile
from pathlib import Path

try:
    import numpy as np
except ImportError:
    print("SKIPPED: numpy is not installed for", sys.executable)
    sys.exit(77)

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "python"))
from lins_peers import zeropp_quant as ref  # noqa: E402

CLI = sys.argv[1] if len(sys.argv) > 1 else None
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL", what)


class Batch:
    """Commands for one run of the CLI, with their files in a temporary folder."""

    def __init__(self, folder):
        self.folder = Path(folder)
        self.lines = []
        self.count = 0

    def path(self, name):
        self.count += 1
        return str(self.folder / f"{self.count}_{name}")

    def write(self, name, array):
        p = self.path(name)
        np.ascontiguousarray(array).tofile(p)
        return p

    def add(self, line):
        self.lines.append(line)
        return len(self.lines) - 1

    def run(self):
        res = subprocess.run([CLI], input="\n".join(self.lines) + "\n", capture_output=True, text=True, timeout=600)
        if res.returncode != 0:
            print(res.stderr)
            raise SystemExit(f"zeropp_quant_cli exited {res.returncode}")
        out = res.stdout.splitlines()
        assert len(out) == len(self.lines), (len(out), len(self.lines))
        return out


def same_bits_f32(a, b):
    """float32 arrays equal to the bit, any NaN equal to any NaN."""
    a = np.asarray(a, dtype=np.float32)
    b = np.asarray(b, dtype=np.float32)
    if a.shape != b.shape:
        return False
    both_nan = np.isnan(a) & np.isnan(b)
    return bool(np.all(both_nan | (a.view(np.uint32) == b.view(np.uint32))))


def first_difference(a, b):
    a = np.asarray(a, dtype=np.float32)
    b = np.asarray(b, dtype=np.float32)
    bad = np.nonzero(~((np.isnan(a) & np.isnan(b)) | (a.view(np.uint32) == b.view(np.uint32))))[0]
    if not bad.size:
        return ""
    return f"first of {bad.size} differences at {bad[0]}: lins {a[bad[0]]!r} DeepSpeed {b[bad[0]]!r}"


# --- inputs -------------------------------------------------------------------------------------------------------

rng = np.random.default_rng(20240817)


def block(kind, size):
    """One block of float32 inputs of a named kind."""
    if kind == "normal":
        return (rng.standard_normal(size) * 10.0 ** rng.uniform(-3, 3)).astype(np.float32)
    if kind == "zeros":
        v = np.zeros(size, dtype=np.float32)
        v[::3] = -0.0
        return v
    if kind == "amax":  # +amax and -amax present, the rest inside
        amax = np.float32(rng.uniform(0.1, 100.0))
        v = (rng.uniform(-1, 1, size) * amax).astype(np.float32)
        v[0], v[-1] = amax, -amax
        return v
    if kind == "ties":  # power-of-two amax, values at k + 1/2 levels (ties for the int4 and int8 grids)
        amax = np.float32(2.0 ** rng.integers(-6, 6))
        ties4 = (rng.integers(-8, 8, size) + 0.5) / 8.0  # (j + 1/2) / scale for int4 (scale = 8 / amax)
        ties8 = (rng.integers(-128, 128, size) + 0.5) / 128.0  # and for int8 (scale = 128 / amax)
        v = (np.where(rng.integers(0, 2, size) == 1, ties4, ties8) * amax).astype(np.float32)
        v[0] = amax
        return v
    if kind == "bf16":  # bf16 values (the low 16 bits of the fp32 cleared): each gets one fp16 rounding
        v = (rng.standard_normal(size) * 10.0 ** rng.uniform(-2, 2)).astype(np.float32)
        return (v.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32)
    if kind == "subnormal":  # fp16 subnormals (below 2^-14) and values that round to zero
        return (rng.standard_normal(size) * 10.0 ** rng.uniform(-8, -5)).astype(np.float32)
    if kind == "large":  # up to the largest fp16
        return np.clip(rng.standard_normal(size) * 30000.0, -65504.0, 65504.0).astype(np.float32)
    if kind == "fp16_midpoints":  # half-way between two fp16 neighbours
        h = rng.standard_normal(size).astype(np.float16)
        nxt = np.nextafter(h, np.float16(np.inf))
        return ((h.astype(np.float32) + nxt.astype(np.float32)) / 2).astype(np.float32)
    if kind == "overflow":  # one value past fp16's range: inf, so the whole block comes back NaN
        v = rng.standard_normal(size).astype(np.float32)
        v[size // 2] = 70000.0
        return v
    raise ValueError(kind)


KINDS = ["normal", "zeros", "amax", "ties", "bf16", "subnormal", "large", "fp16_midpoints", "overflow"]


def mixed(groups, size):
    return np.concatenate([block(KINDS[(g * 7 + int(rng.integers(0, 9))) % len(KINDS)], size) for g in range(groups)])


def main():
    if CLI is None or not os.access(CLI, os.X_OK):
        print("usage: zeropp_quant_peer_test.py <zeropp_quant_cli>")
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        test_fp16(tmp)
        test_blocks(tmp)
        test_dequantize_any_payload(tmp)
        test_qwz_groups(tmp)
        test_qgz_shapes(tmp)
        test_swizzle(tmp)
        test_reduction(tmp)
        test_dequantize_reduce(tmp)
        test_end_to_end(tmp)
    if failures:
        print(f"{len(failures)} checks failed")
        return 1
    print("all checks passed")
    return 0


def test_fp16(tmp):
    b = Batch(tmp)
    bits = rng.integers(0, 2**32, 200000, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32)
    x = x[~np.isnan(x)]
    mids = block("fp16_midpoints", 20000)
    x = np.concatenate([x, mids, np.float32([65504, 65519.996, 65520, 2**-24, 2**-25, 3 * 2**-25, -0.0])])
    out = b.path("fp16.u16")
    b.add(f"fp16 {x.size} {b.write('x.f32', x)} {out}")
    b.run()
    got = np.fromfile(out, dtype=np.uint16)
    want = ref.to_fp16(x).view(np.uint16)
    check(np.array_equal(got, want), f"fp16 rounding: {np.count_nonzero(got != want)} values differ")


def test_blocks(tmp):
    b = Batch(tmp)
    cases = []
    for bits in (8, 4):
        for n, groups in [(8, 1), (2, 1), (64, 8), (8000, 1), (16016, 7), (4096, 4), (96, 12), (1000, 125)]:
            if bits == 4 and (n // groups) % 2:
                continue
            x = mixed(groups, n // groups)
            q, s, d = b.path("q.bin"), b.path("s.f32"), b.path("d.f32")
            xp = b.write("x.f32", x)
            b.add(f"quantize {bits} {n} {groups} {xp} {q} {s}")
            b.add(f"dequantize {bits} {n} {groups} {q} {s} {d}")
            cases.append((bits, n, groups, x, q, s, d))
    # refused layouts answer "error"
    bad = b.add(f"quantize 4 6 2 {b.write('x.f32', np.ones(6, np.float32))} {b.path('q')} {b.path('s')}")
    out = b.run()
    check(out[bad].startswith("error"), f"odd int4 block size refused: {out[bad]}")
    for bits, n, groups, x, q, s, d in cases:
        payload, inv = ref.quantize(x, groups, bits)
        got_q = np.fromfile(q, dtype=np.uint8)
        got_s = np.fromfile(s, dtype=np.float32)
        got_d = np.fromfile(d, dtype=np.float32)
        what = f"int{bits} n={n} groups={groups}"
        check(np.array_equal(got_q, payload.view(np.uint8)), f"{what}: payload differs")
        check(same_bits_f32(got_s, inv), f"{what}: inv_scales differ {first_difference(got_s, inv)}")
        want_d = ref.dequantize(payload, inv, groups, bits).astype(np.float32)
        check(same_bits_f32(got_d, want_d), f"{what}: dequantized differs {first_difference(got_d, want_d)}")


def random_scales(count):
    """inv_scales of every magnitude a block can have, some making fp16 overflow or subnormal results."""
    return (10.0 ** rng.uniform(-9, 4, count)).astype(np.float32)


def test_dequantize_any_payload(tmp):
    b = Batch(tmp)
    cases = []
    for bits in (8, 4):
        n, groups = 4096, 64
        payload = rng.integers(0, 256, n if bits == 8 else n // 2, dtype=np.uint16).astype(np.uint8)
        scales = random_scales(groups)
        d = b.path("d.f32")
        b.add(f"dequantize {bits} {n} {groups} {b.write('q.bin', payload)} {b.write('s.f32', scales)} {d}")
        cases.append((bits, n, groups, payload, scales, d))
    b.run()
    for bits, n, groups, payload, scales, d in cases:
        got = np.fromfile(d, dtype=np.float32)
        want = ref.dequantize(payload, scales, groups, bits).astype(np.float32)
        check(same_bits_f32(got, want), f"dequantize int{bits} of any payload: {first_difference(got, want)}")


def test_qwz_groups(tmp):
    b = Batch(tmp)
    sizes = list(range(0, 2100)) + [7999, 8000, 8001, 8008, 16000, 16008, 16016, 24000, 65536, 1 << 20, 4096 * 4096,
                                    4096 * 11008 // 16, 32000 * 4096 // 64]
    # DeepSpeed's loop steps g one at a time (up to S / 8 steps for S = 8p, p prime): sizes where the transcription
    # stays quick, and the shards of LLaMA-sized matrices (many small factors) up to 10^9 elements.
    sizes += [int(v) * 8 for v in rng.integers(1, 20_000, 300)] + [int(v) for v in rng.integers(1, 100_000, 50)]
    dims = [512, 1024, 2048, 4096, 5120, 8192, 11008, 13824, 14336, 32000, 128256]
    sizes += [a * b // w for a in dims for b in dims[:5] for w in (1, 8, 16, 24, 64, 96)]
    idx = [b.add(f"qwz_groups {s}") for s in sizes]
    out = b.run()
    bad = [(s, out[i], ref.qwz_group_count(s)) for s, i in zip(sizes, idx) if int(out[i]) != ref.qwz_group_count(s)]
    check(not bad, f"qwZ block count differs for {len(bad)} sizes, first {bad[:3]}")


def test_qgz_shapes(tmp):
    b = Batch(tmp)
    shapes = [(2048,), (64, 32), (3, 6), (6, 4), (64, 4), (8, 4, 16), (4096, 4096), (11008, 4096), (32000, 4096),
              (1, 8), (5, 5), (16, 256), (7, 16)]
    shapes += [tuple(int(d) for d in rng.integers(1, 300, int(rng.integers(1, 4)))) for _ in range(300)]
    configs = [(1, 8), (2, 2), (2, 4), (4, 8), (3, 2)]
    idx = []
    for shape in shapes:
        for nodes, gpus in configs:
            idx.append((shape, nodes, gpus, b.add(f"qgz {nodes} {gpus} {','.join(map(str, shape))}")))
    out = b.run()
    for shape, nodes, gpus, i in idx:
        g, ds, lins = (int(v) for v in out[i].split())
        want_ds = ref.qgz_deepspeed_quantizes(shape, nodes, gpus)
        check(ds == int(want_ds), f"qgZ path for {shape} on {nodes}x{gpus}: lins says {ds}, DeepSpeed {want_ds}")
        check(not lins or ds, f"qgZ: lins quantizes {shape} on {nodes}x{gpus} where DeepSpeed does not")
        if len(shape) >= 2:
            check(g == ref.qgz_group_count(shape, nodes * gpus), f"qgZ group count for {shape}")


def test_swizzle(tmp):
    b = Batch(tmp)
    cases = []
    for nodes, gpus, groups_per_slice, size in [(2, 4, 1, 8), (2, 4, 3, 16), (2, 2, 2, 32), (4, 2, 1, 64),
                                                (3, 2, 2, 8), (2, 8, 4, 24)]:
        world = nodes * gpus
        groups = world * groups_per_slice
        n = groups * size
        x = mixed(groups, size)
        q, s = b.path("q.bin"), b.path("s.f32")
        b.add(f"swizzle {n} {groups} {nodes} {gpus} {b.write('x.f32', x)} {q} {s}")
        cases.append((nodes, gpus, groups, x, q, s))
    b.run()
    for nodes, gpus, groups, x, q, s in cases:
        payload, scales = ref.swizzle_quant(x, groups, nodes, gpus)
        what = f"swizzle {nodes}x{gpus} groups={groups}"
        check(np.array_equal(np.fromfile(q, dtype=np.uint8), payload), f"{what}: payload differs")
        got_s = np.fromfile(s, dtype=np.float32)
        check(same_bits_f32(got_s, scales), f"{what}: scales differ {first_difference(got_s, scales)}")


def peer_inputs(peers, groups, size, kind):
    """peers int4 tensors of groups blocks of size: quantized from mixed blocks, or random bytes and scales."""
    if kind == "quantized":
        parts = [ref.quantize(mixed(groups, size), groups, 4) for _ in range(peers)]
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
    payload = rng.integers(0, 256, peers * groups * size // 2, dtype=np.uint16).astype(np.uint8)
    return payload, random_scales(peers * groups)


def test_reduction(tmp):
    b = Batch(tmp)
    cases = []
    for peers in (2, 3, 4, 8):
        for groups, size in [(1, 8), (4, 32), (3, 64), (2, 1024)]:
            for kind in ("quantized", "random"):
                payload, scales = peer_inputs(peers, groups, size, kind)
                elems = groups * size
                q, s = b.path("q.bin"), b.path("s.f32")
                b.add(f"reduce {elems} {groups} {peers} {b.write('in.bin', payload)} {b.write('in.f32', scales)} "
                      f"{q} {s}")
                cases.append((peers, groups, size, kind, payload, scales, q, s))
    b.run()
    for peers, groups, size, kind, payload, scales, q, s in cases:
        want_q, want_s = ref.quantized_reduction(payload, scales, groups * peers, groups, peers)
        what = f"quantized_reduction peers={peers} groups={groups} size={size} ({kind})"
        check(np.array_equal(np.fromfile(q, dtype=np.uint8), want_q), f"{what}: payload differs")
        got_s = np.fromfile(s, dtype=np.float32)
        check(same_bits_f32(got_s, want_s), f"{what}: scales differ {first_difference(got_s, want_s)}")


def test_dequantize_reduce(tmp):
    b = Batch(tmp)
    cases = []
    for peers in (2, 3, 4):
        for groups, size in [(1, 8), (4, 32), (2, 512)]:
            for divisor in (None, 2 * peers, 3, 8):
                kind = "quantized" if divisor in (None, 3) else "random"
                payload, scales = peer_inputs(peers, groups, size, kind)
                d = peers if divisor is None else divisor
                out = b.path("out.f32")
                b.add(f"dequant_reduce {groups * size} {groups} {peers} {d} {b.write('in.bin', payload)} "
                      f"{b.write('in.f32', scales)} {out}")
                cases.append((peers, groups, size, divisor, payload, scales, out))
    b.run()
    for peers, groups, size, divisor, payload, scales, out in cases:
        want = ref.dequantize_reduce(payload, scales, peers, divisor).astype(np.float32)
        got = np.fromfile(out, dtype=np.float32)
        what = f"dequantize_reduce peers={peers} groups={groups} size={size} divisor={divisor}"
        check(same_bits_f32(got, want), f"{what}: {first_difference(got, want)}")


def test_end_to_end(tmp):
    """lins's three steps (the all-to-alls as copies, as tests/unit/kernels/quantize_test.cpp does) against
    DeepSpeed's all_to_all_quant_reduce emulated in numpy, on every rank."""
    for nodes, gpus, shape, divisor in [(2, 2, (64, 32), None), (2, 4, (128, 64), None), (2, 4, (128, 64), 8),
                                        (3, 2, (48, 96), None)]:
        world = nodes * gpus
        m = shape[0] * shape[1]
        groups = ref.qgz_group_count(shape, world)
        grads = [(rng.standard_normal(m) * 1e-2).astype(np.float32) for _ in range(world)]
        want = ref.all_to_all_quant_reduce(grads, shape, nodes, gpus, divisor)
        # step 1: swizzled quantize on every rank
        b = Batch(tmp)
        files = []
        for r in range(world):
            q, s = b.path("q.bin"), b.path("s.f32")
            b.add(f"swizzle {m} {groups} {nodes} {gpus} {b.write('g.f32', grads[r])} {q} {s}")
            files.append((q, s))
        b.run()
        sent = [(np.fromfile(q, dtype=np.uint8), np.fromfile(s, dtype=np.float32)) for q, s in files]
        # intra-node all-to-all, then step 2
        cb, cg = m // 2 // gpus, groups // gpus
        b = Batch(tmp)
        files = []
        for node in range(nodes):
            for k in range(gpus):
                peers = [node * gpus + j for j in range(gpus)]
                payload = np.concatenate([sent[p][0][k * cb:(k + 1) * cb] for p in peers])
                scales = np.concatenate([sent[p][1][k * cg:(k + 1) * cg] for p in peers])
                q, s = b.path("q.bin"), b.path("s.f32")
                b.add(f"reduce {m // gpus} {cg} {gpus} {b.write('in.bin', payload)} {b.write('in.f32', scales)} "
                      f"{q} {s}")
                files.append((q, s))
        b.run()
        reduced = [(np.fromfile(q, dtype=np.uint8), np.fromfile(s, dtype=np.float32)) for q, s in files]
        # inter-node all-to-all, then step 3
        sb, sg = cb // nodes, cg // nodes
        b = Batch(tmp)
        outs = {}
        for k in range(gpus):
            for node in range(nodes):
                srcs = [src * gpus + k for src in range(nodes)]
                payload = np.concatenate([reduced[s][0][node * sb:(node + 1) * sb] for s in srcs])
                scales = np.concatenate([reduced[s][1][node * sg:(node + 1) * sg] for s in srcs])
                out = b.path("out.f32")
                d = nodes if divisor is None else divisor
                b.add(f"dequant_reduce {m // world} {sg} {nodes} {d} {b.write('in.bin', payload)} "
                      f"{b.write('in.f32', scales)} {out}")
                outs[node * gpus + k] = out
        b.run()
        exact = np.sum(np.stack([g.astype(np.float64) for g in grads]), axis=0)
        exact /= nodes if divisor is None else divisor
        for r in range(world):
            got = np.fromfile(outs[r], dtype=np.float32)
            w = want[r].astype(np.float32)
            what = f"qgZ end to end {nodes}x{gpus} {shape} divisor={divisor} rank {r}"
            check(same_bits_f32(got, w), f"{what}: {first_difference(got, w)}")
            sl = exact[r * (m // world):(r + 1) * (m // world)]
            check(np.max(np.abs(got - sl)) < 0.5 * np.max(np.abs(sl)), f"{what}: far from the exact sum")


if __name__ == "__main__":
    sys.exit(main())
