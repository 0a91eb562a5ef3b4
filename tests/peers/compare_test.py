"""lins_peers.compare on hand-made collective logs: each verdict, the padding rule, bookkeeping set aside, the exit
status, and the byte accounting of the recorder's nccl-tests convention (standard library only: runs without the
peers' Python)."""

import csv
import io
import tempfile
import unittest
from contextlib import redirect_stdout
from pathlib import Path

from lins_peers import compare
from lins_peers.recorder import LOG_COLUMNS, _tensors_of, read_log


def rows(strategy, ops, ranks=(0, 1), step=0, system="x"):
    """ops: (kind, group_size, elems, dtype) per collective, the same on every rank."""
    out = []
    size = {"bf16": 2, "fp32": 4, "int64": 8, "uint8": 1}
    for rank in ranks:
        for i, (kind, g, elems, dtype) in enumerate(ops):
            out.append({"system": system, "strategy": strategy, "rank": rank, "step": step, "index": i,
                        "kind": kind, "group_size": g, "elems": elems, "dtype": dtype,
                        "message_bytes": elems * size[dtype]})
    return out


ZERO3 = [("all_gather", 4, 400, "bf16"), ("all_gather", 4, 1552, "bf16"), ("reduce_scatter", 4, 1552, "bf16"),
         ("reduce_scatter", 4, 400, "bf16")]


def verdicts(a, b, **kw):
    return {r.verdict for r in compare.compare_logs(a, b, None, None, **kw)}


class CompareTest(unittest.TestCase):
    def test_identical(self):
        self.assertEqual(verdicts(rows("zero3", ZERO3), rows("full", ZERO3)), {"identical"})

    def test_padding_within_group_size_times_pad(self):
        padded = [(k, g, e + 4 if k == "all_gather" else e, d) for k, g, e, d in ZERO3]  # 1 element per rank
        self.assertEqual(verdicts(rows("a", ZERO3), rows("b", padded)), {"padding"})
        too_much = [(k, g, e + 12 if k == "all_gather" else e, d) for k, g, e, d in ZERO3]  # 3 per rank > pad 2
        self.assertEqual(verdicts(rows("a", ZERO3), rows("b", too_much)), {"different"})

    def test_granularity(self):
        split = [("all_gather", 4, 400, "bf16"), ("all_gather", 4, 1000, "bf16"), ("all_gather", 4, 552, "bf16"),
                 ("reduce_scatter", 4, 1952, "bf16")]
        results = compare.compare_logs(rows("a", ZERO3), rows("b", split), None, None)
        self.assertEqual({r.verdict for r in results}, {"granularity"})
        self.assertTrue(any("2 call(s) in lins, 3 in peer" in line for line in results[0].lines))

    def test_order_kind_group_and_dtype_differences(self):
        reordered = [ZERO3[0], ZERO3[2], ZERO3[1], ZERO3[3]]
        results = compare.compare_logs(rows("a", ZERO3), rows("b", reordered), None, None)
        self.assertEqual({r.verdict for r in results}, {"different"})
        self.assertTrue(any("the order differs" in line for line in results[0].lines))
        other_group = [(k, 2 if k == "reduce_scatter" else g, e, d) for k, g, e, d in ZERO3]
        self.assertEqual(verdicts(rows("a", ZERO3), rows("b", other_group)), {"different"})
        all_reduce = [("all_reduce" if k == "reduce_scatter" else k, g, e, d) for k, g, e, d in ZERO3]
        self.assertEqual(verdicts(rows("a", ZERO3), rows("b", all_reduce)), {"different"})
        fp32 = [(k, g, e, "fp32") for k, g, e, d in ZERO3]
        self.assertEqual(verdicts(rows("a", ZERO3), rows("b", fp32)), {"different"})

    def test_bookkeeping_set_aside_unless_strict(self):
        extra = ZERO3 + [("all_reduce", 4, 1, "fp32"), ("broadcast", 4, 56, "int64"), ("barrier", 4, 0, "uint8")]
        self.assertEqual(verdicts(rows("a", ZERO3), rows("b", extra)), {"identical"})
        self.assertEqual(verdicts(rows("a", ZERO3), rows("b", extra), strict=True), {"different"})
        big = ZERO3 + [("all_reduce", 4, 400, "bf16")]  # a real all-reduce is never bookkeeping
        self.assertEqual(verdicts(rows("a", ZERO3), rows("b", big)), {"different"})

    def test_missing_rank_or_step(self):
        self.assertEqual(verdicts(rows("a", ZERO3, ranks=(0, 1)), rows("b", ZERO3, ranks=(0,))),
                         {"identical", "different"})

    def test_cli_exit_status(self):
        with tempfile.TemporaryDirectory() as d:
            def write(name, data):
                path = Path(d) / name
                with open(path, "w", newline="") as f:
                    w = csv.DictWriter(f, LOG_COLUMNS)
                    w.writeheader()
                    w.writerows(data)
                return str(path)

            a = write("a.csv", rows("zero3", ZERO3))
            b = write("b.csv", rows("full", ZERO3[::-1]))
            buf = io.StringIO()
            with redirect_stdout(buf):
                self.assertEqual(compare.main([a, a, "--system", "zero3", "--quiet"]), 0)
                self.assertEqual(compare.main([a, b, "--system", "zero3", "--quiet"]), 1)
                self.assertEqual(compare.main([a, b, "--system", "zero3", "--allow", "different", "--quiet"]), 0)
                self.assertEqual(compare.main([a, b, "--system", "nope"]), 2)
            self.assertEqual(len(read_log(a)), 8)
            bad = Path(d) / "bad.csv"
            bad.write_text("a,b\n1,2\n")
            with redirect_stdout(io.StringIO()):
                self.assertEqual(compare.main([str(bad), a, "--system", "zero3"]), 2)


class FakeTensor:
    def __init__(self, n, size=2, dtype="torch.bfloat16"):
        self.n, self.size, self.dtype = n, size, dtype

    def numel(self):
        return self.n

    def element_size(self):
        return self.size


class MessageBytesTest(unittest.TestCase):
    """nccl-tests: gathered size of an all-gather, input of a reduce-scatter, buffer of an all-reduce."""

    def test_conventions(self):
        out, inp = FakeTensor(400), FakeTensor(100)
        self.assertEqual(_tensors_of("all_gather", "all_gather_single", {"output_tensor": out,
                                                                         "input_tensor": inp}), [(400, 800, "bf16")])
        self.assertEqual(_tensors_of("reduce_scatter", "reduce_scatter_single", {"output": inp, "input": out}),
                         [(400, 800, "bf16")])
        self.assertEqual(_tensors_of("all_gather", "all_gather", {"tensor_list": [inp] * 4, "tensor": inp}),
                         [(400, 800, "bf16")])
        self.assertEqual(_tensors_of("reduce_scatter", "reduce_scatter", {"output": inp, "input_list": [inp] * 4}),
                         [(400, 800, "bf16")])
        self.assertEqual(_tensors_of("all_reduce", "all_reduce", {"tensor": FakeTensor(7, 4, "torch.float32")}),
                         [(7, 28, "fp32")])
        # a coalesced all-reduce is one row per tensor, as NCCL's group of one collective per tensor
        self.assertEqual(_tensors_of("all_reduce", "all_reduce_coalesced", {"tensors": [inp, out]}),
                         [(100, 200, "bf16"), (400, 800, "bf16")])


if __name__ == "__main__":
    unittest.main()
