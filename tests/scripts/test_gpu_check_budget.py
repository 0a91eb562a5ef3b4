#!/usr/bin/env python3
"""scripts/gpu_check.py's time budget, through its pure stage_limit: the stage table its header documents is the one
it uses; with every stage taking all the time it may, or any stage eating its whole limit while the others take part
of theirs, the run ends within the budget and every stage gets at least its floor (at 420 s and scaled budgets); a
stage without a floor is skipped under 20 s (scaled), one with a floor is not; and the limits are those the check
printed on a real GPU machine at a 300 s budget. Standard library only.

    test_gpu_check_budget.py [path/to/scripts]
"""
import os
import random
import re
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.path.join(HERE, "..", "..", "scripts")
if len(sys.argv) > 1 and os.path.isdir(sys.argv[1]):
    SCRIPTS = sys.argv.pop(1)
sys.path.insert(0, os.path.abspath(SCRIPTS))
sys.dont_write_bytecode = True
import gpu_check  # noqa: E402

STAGES = gpu_check.STAGES
BUDGETS = [420, 300, 100, 600, 1200]


def run_through(budget, used):
    """Every stage in order, started when the ones before it ended; used(index, limit) is the time stage `index`
    takes of its limit. Returns [(name, limit or None)] and the end time."""
    elapsed, limits = 0, []
    for i, stage in enumerate(STAGES):
        limit = gpu_check.stage_limit(STAGES, i, elapsed, budget)
        limits.append((stage.name, limit))
        if limit is not None:
            elapsed += used(i, limit)
    return limits, elapsed


class StageTable(unittest.TestCase):
    def test_the_header_table_is_the_one_used(self):
        table = re.findall(r"^  ([a-z]+) {2,}(\d+) {2,}(\d+)  ", gpu_check.__doc__, re.M)
        self.assertEqual([(s.name, s.cap_s, s.floor_s) for s in STAGES],
                         [(name, int(cap), int(floor)) for name, cap, floor in table])

    def test_stage_order_and_optional_stages(self):
        self.assertEqual([s.name for s in STAGES], ["setup", "configure", "build", "tests", "sanitizer", "bench",
                                                     "step", "ncclpair", "contention", "torch", "finish"])
        self.assertEqual([s.name for s in STAGES if s.optional], ["ncclpair", "contention", "torch"])
        torch = STAGES[[s.name for s in STAGES].index("torch")]
        self.assertEqual((torch.cap_s, torch.floor_s), (60, 0))

    def test_floors_sum_to_310_of_420(self):
        self.assertEqual(sum(s.floor_s for s in STAGES), 310)

    def test_default_budget(self):
        self.assertEqual(gpu_check.read_budget({}), (420, 420.0))
        self.assertEqual(gpu_check.read_budget({"GPU_CHECK_BUDGET_S": "300"}), (300, 300.0))
        self.assertEqual(gpu_check.read_budget({"GPU_CHECK_BUDGET_S": "300", "GPU_CHECK_WATCHDOG_S": "5"}),
                         (300, 5.0))
        for bad in ("abc", "59", "4.5"):
            with self.assertRaises(ValueError):
                gpu_check.read_budget({"GPU_CHECK_BUDGET_S": bad})


class StageLimit(unittest.TestCase):
    def check_run(self, budget, limits, end):
        self.assertLessEqual(end, budget, "the stages end past the budget: %s" % limits)
        for stage, (name, limit) in zip(STAGES, limits):
            floor = gpu_check.scaled(stage.floor_s, budget)
            if floor > 0:
                self.assertIsNotNone(limit, "budget %d: %s skipped" % (budget, name))
                self.assertGreaterEqual(limit, floor, "budget %d: %s gets %s s, under its floor %d s: %s"
                                        % (budget, name, limit, floor, limits))
            if limit is not None:
                self.assertLessEqual(limit, gpu_check.scaled(stage.cap_s, budget))

    def test_every_stage_taking_its_whole_limit(self):
        for budget in BUDGETS:
            with self.subTest(budget=budget):
                limits, end = run_through(budget, lambda i, limit: limit)
                self.check_run(budget, limits, end)
        # At 420 s the worst case the header gives: setup 45, configure 60, build 150, tests 80, no sanitizer or
        # benchmarks, step 75, no optional stage, finish 10 = 420.
        limits, end = run_through(420, lambda i, limit: limit)
        self.assertEqual(dict(limits), {"setup": 45, "configure": 60, "build": 150, "tests": 80, "sanitizer": None,
                                        "bench": None, "step": 75, "ncclpair": None, "contention": None,
                                        "torch": None, "finish": 10})
        self.assertEqual(end, 420)

    def test_a_slow_stage_eating_its_cap(self):
        # One stage takes its whole limit, every other a part of its own: the later floors are still kept.
        rng = random.Random(7)
        for budget in BUDGETS:
            for slow in range(len(STAGES)):
                for _ in range(20):
                    fractions = [rng.random() for _ in STAGES]
                    with self.subTest(budget=budget, slow=STAGES[slow].name):
                        limits, end = run_through(
                            budget, lambda i, limit: limit if i == slow else int(limit * fractions[i]))
                        self.check_run(budget, limits, end)

    def test_a_quick_run_gives_every_stage_its_cap(self):
        for budget in BUDGETS:
            limits, _ = run_through(budget, lambda i, limit: 1)
            self.assertEqual([limit for _, limit in limits], [gpu_check.scaled(s.cap_s, budget) for s in STAGES])

    def test_stages_without_a_floor_are_skipped_under_20_s_scaled(self):
        for budget in (420, 300, 100):
            minimum = 20 * budget // 420
            self.assertEqual(gpu_check.optional_min_s(budget), minimum)
            for i, stage in enumerate(STAGES):
                later = gpu_check.later_floors_s(STAGES, i, budget)
                # The elapsed time that leaves the stage exactly t seconds.
                at = lambda t: budget - later - t  # noqa: E731
                with self.subTest(budget=budget, stage=stage.name):
                    if stage.floor_s == 0:
                        self.assertIsNone(gpu_check.stage_limit(STAGES, i, at(minimum - 1), budget))
                        self.assertEqual(gpu_check.stage_limit(STAGES, i, at(minimum), budget), minimum)
                    else:
                        # Under its floor a stage with one still runs, with what is left; under 1 s it cannot.
                        low = min(minimum - 1, gpu_check.scaled(stage.cap_s, budget))
                        self.assertEqual(gpu_check.stage_limit(STAGES, i, at(low), budget), low)
                        self.assertIsNone(gpu_check.stage_limit(STAGES, i, at(0.5), budget))
                        self.assertIsNone(gpu_check.stage_limit(STAGES, i, at(-10), budget))

    def test_limits_printed_on_the_gpu_machine_at_300_s(self):
        # data/gpu/h200-2026-12-04/summary.txt: each stage's start (s) and its "limit ...: cap ..., ... kept" line.
        seen = {"setup": (0, 32, 187), "configure": (4, 42, 166), "build": (13, 107, 102), "tests": (49, 107, 60),
                "bench": (70, 28, 60), "step": (72, 107, 7), "ncclpair": (81, 21, 7), "contention": (85, 28, 7)}
        names = [s.name for s in STAGES]
        for name, (start, limit, kept) in seen.items():
            i = names.index(name)
            self.assertEqual(gpu_check.stage_limit(STAGES, i, start, 300), limit, name)
            self.assertEqual(gpu_check.later_floors_s(STAGES, i, 300), kept, name)


class TestDiscovery(unittest.TestCase):
    def test_reads_both_cmake_spellings_of_a_test_name(self):
        build = os.path.realpath("/b")
        cmake3 = f'add_test([=[gpu_kernels.cast]=] "{build}/tests/k/kernels_gpu_test" "cast")\n'
        cmake4 = f'add_test("gpu_comm" "{build}/tests/c/gpu_comm_test")\nadd_test("unit_x" "{build}/tests/u/unit_x")\n'
        outside = 'add_test("gpu_step" "/elsewhere/gpu_step_test")\n'
        got = gpu_check.gpu_test_executables([cmake3, cmake4, outside], {"gpu_kernels.cast", "gpu_comm", "gpu_step"},
                                             build)
        self.assertEqual(got, ["gpu_comm_test", "kernels_gpu_test"])


if __name__ == "__main__":
    unittest.main(verbosity=2)

