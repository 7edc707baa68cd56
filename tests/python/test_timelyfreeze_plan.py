"""Tests of tools/python/timelyfreeze_plan with the standard library only
(its torch hook: test_torch_stage.py).

test_same_as_tf_exec compares the module's choices with the executor's own
selector, driven by tests/python/freeze_choices (built by ctest's build and
named in TF_FREEZE_CHOICES), on plans tf-plan makes (TF_PLAN)."""
import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.environ.get("TF_SOURCE_DIR", os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(SOURCE, "tools", "python"))

from timelyfreeze_plan import (FreezeSchedule, FreezeSelector, PlanError, Rng,  # noqa: E402
                               freeze_count, parse_plan, phase_factor, rank_stages)
from timelyfreeze_plan.__main__ import main as cli_main  # noqa: E402
from timelyfreeze_plan.selection import threefry4x64_20  # noqa: E402


def plan_doc(ranks=2, microbatches=2, ratios=None, recompute=None):
    """A plan of `ranks` stages (one per rank), F and B per microbatch, B
    with ratios[(stage, microbatch)] and, where given, recompute_ratio
    recompute[(stage, microbatch)]."""
    ratios, recompute = ratios or {}, recompute or {}
    actions = []
    for s in range(ranks):
        for m in range(microbatches):
            actions.append({"rank": s, "stage": s, "microbatch": m, "type": "F",
                            "freeze_ratio": 0})
            backward = {"rank": s, "stage": s, "microbatch": m, "type": "B",
                        "freeze_ratio": ratios.get((s, m), 0.0)}
            if (s, m) in recompute:
                backward["recompute_ratio"] = recompute[(s, m)]
            actions.append(backward)
    return {"format": "tf-plan", "ranks": ranks, "stages_per_rank": 1,
            "microbatches": microbatches, "actions": actions}


class RngTest(unittest.TestCase):
    def test_threefry_known_answers(self):
        # Random123's published known answers for threefry4x64 with 20
        # rounds (examples/kat_vectors): counter and key all 0, all 1 bits,
        # and digits of pi.
        ones = [(1 << 64) - 1] * 4
        pi_counter = [0x243F6A8885A308D3, 0x13198A2E03707344, 0xA4093822299F31D0,
                      0x082EFA98EC4E6C89]
        pi_key = [0x452821E638D01377, 0xBE5466CF34E90C6C, 0xBE5466CF34E90C6C,
                  0xC0AC29B7C97C50DD]
        for key, counter, want in [
                ([0] * 4, [0] * 4, [0x09218EBDE6C85537, 0x55941F5266D86105,
                                    0x4BD25E16282434DC, 0xEE29EC846BD2E40B]),
                (ones, ones, [0x29C24097942BBA1B, 0x0371BBFB0F6F4E11, 0x3C231FFA33F83A1C,
                              0xCD29113FDE32D168]),
                (pi_key, pi_counter, [0xA7E8FDE591651BD9, 0xBAAFD0C30138319B,
                                      0x84A5C1A729E685B9, 0x901D406CCEBC1BA4])]:
            self.assertEqual(threefry4x64_20(key, counter), want)

    def test_stream_is_threefry_in_counter_mode(self):
        # Seed 0, domain 0, coordinates 0: block 0 is the all-zero answer;
        # word 4 is block 1, the counter (1, 0, 0, 0).
        r = Rng.for_coords(0, 0, 0, 0, 0)
        self.assertEqual([r.next() for _ in range(4)],
                         [0x09218EBDE6C85537, 0x55941F5266D86105, 0x4BD25E16282434DC,
                          0xEE29EC846BD2E40B])
        self.assertEqual(r.next(), threefry4x64_20([0] * 4, [1, 0, 0, 0])[0])
        # The domain sits above the block count in counter word 0.
        r = Rng.for_coords(5, 3, 7, 8, 9)
        self.assertEqual(r.next(), threefry4x64_20([5, 0, 0, 0], [3 << 48, 7, 8, 9])[0])

    def test_below_is_the_word_mod_n_when_accepted(self):
        # 2^64 mod 10 = 6: the first word (0x0921...) is far above it, so
        # below(10) is that word mod 10; below(1) is always 0.
        first = 0x09218EBDE6C85537
        self.assertEqual(Rng.for_coords(0, 0, 0, 0, 0).below(10), first % 10)
        self.assertEqual(Rng.for_coords(0, 0, 0, 0, 0).below(1), 0)
        # n = 2^63 + 1 rejects words below 2^63 - 1: the block's first three
        # words are, so the fourth (0xEE29...) is taken, mod n.
        n = (1 << 63) + 1
        self.assertEqual(Rng.for_coords(0, 0, 0, 0, 0).below(n), 0xEE29EC846BD2E40B % n)

    def test_uniform_in_unit_interval(self):
        r = Rng.for_coords(7, 1, 2, 3, 4)
        xs = [r.uniform() for _ in range(1000)]
        self.assertTrue(all(0.0 <= x < 1.0 for x in xs))
        # The mean of 1000 uniforms: sd 0.0091; 5 sd.
        self.assertAlmostEqual(sum(xs) / len(xs), 0.5, delta=0.046)

    def test_coordinates_give_other_streams(self):
        a = Rng.for_coords(1, 3, 3, 4, 0).next()
        self.assertNotEqual(a, Rng.for_coords(1, 3, 3, 5, 0).next())
        self.assertNotEqual(a, Rng.for_coords(1, 2, 3, 4, 0).next())
        self.assertEqual(a, Rng.for_coords(1, 3, 3, 4, 0).next())


class RulesTest(unittest.TestCase):
    def test_freeze_count_rounds_half_up(self):
        self.assertEqual(freeze_count(0.25, 6), 2)    # 1.5 -> 2
        self.assertEqual(freeze_count(0.2, 6), 1)     # 1.2 -> 1
        self.assertEqual(freeze_count(1.5, 6), 6)     # clamped
        self.assertEqual(freeze_count(-0.1, 6), 0)
        self.assertEqual(freeze_count(float("nan"), 6), 0)

    def test_phase_factor(self):
        self.assertEqual(phase_factor(9, warmup=10, ramp=10), 0.0)
        self.assertEqual(phase_factor(10, warmup=10, ramp=10), 0.1)
        self.assertEqual(phase_factor(19, warmup=10, ramp=10), 1.0)
        self.assertEqual(phase_factor(0, warmup=0, ramp=0), 1.0)
        self.assertEqual(phase_factor(50, no_freeze=True), 0.0)

    def test_random_freezes_k_and_favours_stage_zero_front(self):
        sel = FreezeSelector([10, 10], "random", seed=3)
        first = last = 0
        for step in range(400):
            mask = sel.select(step, 0, 1, 0.3)
            self.assertEqual(sum(mask), 3)
            first += mask[0]
            last += mask[-1]
            self.assertEqual(sum(sel.select(step, 1, 1, 0.3)), 3)
        self.assertGreater(first, 2 * last)   # weights 1.0 vs 0.1
        self.assertEqual(sel.select(5, 0, 2, 0.5), FreezeSelector([10, 10], seed=3).select(5, 0, 2, 0.5))

    def test_rotate_takes_tensors_in_turn(self):
        sel = FreezeSelector([5], "rotate")
        masks = [sel.select(0, 0, m, 0.4) for m in range(5)]
        counts = [sum(mask[i] for mask in masks) for i in range(5)]
        self.assertEqual(counts, [2] * 5)
        self.assertEqual(masks[0], [True, True, False, False, False])
        self.assertEqual(masks[1], [False, False, True, True, False])

    def test_refuses_the_gradient_statistics_method(self):
        # tf-exec's "stable" follows its own run's gradients: no plan holds
        # them, so the module says so instead of choosing something else.
        with self.assertRaisesRegex(ValueError, "method 'stable'.*cannot reproduce"):
            FreezeSelector([5], "stable")
        with self.assertRaisesRegex(ValueError, "expected random or rotate"):
            FreezeSelector([5], "sometimes")

    def test_schedule_applies_ratios_with_the_phase(self):
        plan = parse_plan(plan_doc(ratios={(0, 1): 1.0, (1, 0): 0.5}))
        sched = FreezeSchedule(plan, [4, 4], warmup=2, ramp=2)
        self.assertFalse(any(any(m) for m in sched.step_choices(1).values()))
        ch = sched.step_choices(2)       # factor 0.5
        self.assertEqual(sum(ch[(0, 1)]), 2)
        self.assertEqual(sum(ch[(1, 0)]), 1)
        ch = sched.step_choices(3)       # factor 1
        self.assertEqual(sum(ch[(0, 1)]), 4)
        self.assertEqual(sum(ch[(1, 0)]), 2)
        self.assertEqual(sum(ch[(0, 0)]), 0)


class PlanTest(unittest.TestCase):
    def test_reads_backward_ratios(self):
        plan = parse_plan(plan_doc(ratios={(1, 1): 0.75}))
        self.assertEqual((plan.stages, plan.microbatches), (2, 2))
        self.assertEqual(plan.ratio(1, 1), 0.75)
        self.assertEqual(plan.ratio(0, 0), 0.0)

    def test_reads_recompute_ratios(self):
        plan = parse_plan(plan_doc(recompute={(0, 1): 0.5, (1, 0): 0.0}))
        self.assertEqual(plan.recompute_ratio(0, 1), 0.5)
        self.assertEqual(plan.recompute_ratio(1, 0), 0.0)
        self.assertEqual(plan.recompute_ratio(1, 1), 0.0)     # absent: 0
        # A split backward: its I carries it (formats.md); R actions are
        # read past.
        doc = plan_doc(ranks=1, microbatches=1)
        doc["actions"] = [{"type": "R", "stage": 0, "microbatch": 0, "ms": 1.0},
                          {"type": "I", "stage": 0, "microbatch": 0, "recompute_ratio": 0.25},
                          {"type": "W", "stage": 0, "microbatch": 0, "freeze_ratio": 1.0}]
        plan = parse_plan(doc)
        self.assertEqual((plan.recompute_ratio(0, 0), plan.ratio(0, 0)), (0.25, 1.0))
        sched = FreezeSchedule(plan, [4], warmup=5)
        self.assertEqual([sched.recompute_count(0, 0, n) for n in (1, 2, 4, 6)], [0, 1, 1, 2])

    def test_rank_stages_as_pytorch_places_them(self):
        # 4 ranks: round robin for the looped schedules, a V for ZBV and
        # DualPipeV (stage s on rank s, else 2P - 1 - s).
        self.assertEqual(rank_stages("1F1B", 2, 4), [2])
        self.assertEqual(rank_stages("Interleaved1F1B", 1, 4, 3), [1, 5, 9])
        self.assertEqual(rank_stages("ZBVZeroBubble", 0, 4, 2), [0, 7])
        self.assertEqual(rank_stages("DualPipeV", 3, 4, 2), [3, 4])

    def test_refuses_bad_plans(self):
        for doc, needle in [
            ({"format": "tf-profile"}, "expected a tf-plan plan"),
            ({"ranks": 0, "microbatches": 1, "actions": []}, "$.ranks"),
            (dict(plan_doc(), version=3), "$.version: version 3 is newer than the tf-plan "
                                          "version this module reads (2)"),
            (dict(plan_doc(), version="1"), "$.version: expected an integer"),
            ({"ranks": 1, "microbatches": 1}, "$.actions"),
            (dict(plan_doc(), actions=[{"type": "B", "stage": 5, "microbatch": 0,
                                        "freeze_ratio": 0}]), "outside"),
            (dict(plan_doc(), actions=[{"type": "B", "stage": 0, "microbatch": 0,
                                        "freeze_ratio": 1.5}]), "freeze_ratio"),
            (dict(plan_doc(), actions=[{"type": "W", "stage": 0, "microbatch": 0}]),
             "freeze_ratio"),
            (plan_doc(recompute={(1, 0): -0.5}), "$.actions[5].recompute_ratio: expected a "
                                                 "number in [0, 1], got -0.5"),
            (plan_doc(recompute={(0, 0): "half"}), "$.actions[1].recompute_ratio: expected a "
                                                   "float"),
        ]:
            with self.assertRaises(PlanError) as cm:
                parse_plan(doc, "p.json")
            self.assertIn(needle, str(cm.exception))
            self.assertIn("p.json", str(cm.exception))


def need(var):
    value = os.environ.get(var)
    if not value:
        raise unittest.SkipTest(f"{var} is not set (run through ctest)")
    return value


class SameAsTfExecTest(unittest.TestCase):
    """The module's choices equal tf-exec's, bit for bit, for the same plan,
    seed, method and phases."""

    @classmethod
    def setUpClass(cls):
        cls.helper = need("TF_FREEZE_CHOICES")
        plan_bin = need("TF_PLAN")
        cls.tmp = tempfile.TemporaryDirectory()
        cls.plans = {}
        # spread gives fractional ratios, so round(r K) and the draws matter.
        for name, profile in [("1f1b", "1f1b-p4-m8"), ("zb", "interleaved-zb-p4-m8")]:
            path = os.path.join(cls.tmp.name, name + ".plan.json")
            subprocess.run([plan_bin, os.path.join(SOURCE, "traces", "examples",
                                                   profile + ".profile.json"),
                            "--objective", "spread", "--max-freeze-ratio", "0.6", "-q",
                            "-o", path], check=True)
            cls.plans[name] = path

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def compare(self, plan, method, seed, tensors, steps=14, warmup=3, ramp=4):
        c = subprocess.run([self.helper, plan, method, str(seed), str(steps), str(warmup),
                            str(ramp), tensors], check=True, capture_output=True, text=True)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = cli_main([plan, "--tensors", tensors, "--method", method, "--seed", str(seed),
                           "--steps", str(steps), "--warmup", str(warmup), "--ramp", str(ramp)])
        self.assertEqual(rc, 0)
        mine, theirs = out.getvalue().splitlines(), c.stdout.splitlines()
        self.assertGreater(len(theirs), 0)
        self.assertEqual(mine, theirs)
        return theirs

    def test_random_1f1b(self):
        for seed in (1, 42, 2**63 + 5):
            lines = self.compare(self.plans["1f1b"], "random", seed, "9,7,4,1")
            self.assertTrue(any("1" in line.split()[3] for line in lines))

    def test_random_split_backward(self):
        with open(self.plans["zb"]) as f:
            stages = json.load(f)["ranks"] * 2
        self.compare(self.plans["zb"], "random", 7, ",".join(["6"] * stages))

    def test_rotate(self):
        self.compare(self.plans["1f1b"], "rotate", 1, "5,5,3,2")


class WithoutTorchTest(unittest.TestCase):
    """Only attach needs torch: in a python where `import torch` fails, the
    module loads and chooses what it chooses here."""

    def test_chooses_with_torch_unimportable(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "p.json")
            with open(path, "w") as f:
                json.dump(plan_doc(ratios={(0, 1): 0.5, (1, 0): 1.0}), f)
            args = [path, "--tensors", "4,4", "--steps", "2", "--warmup", "0", "--ramp", "0"]
            code = ("import sys; sys.modules['torch'] = None; sys.path.insert(0, sys.argv[1]); "
                    "from timelyfreeze_plan.__main__ import main; sys.exit(main(sys.argv[2:]))")
            done = subprocess.run([sys.executable, "-c", code,
                                   os.path.join(SOURCE, "tools", "python"), *args],
                                  capture_output=True, text=True)
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                cli_main(args)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(done.stdout, out.getvalue())
        self.assertIn("1 1 0 1111", done.stdout.splitlines())


if __name__ == "__main__":
    unittest.main()
