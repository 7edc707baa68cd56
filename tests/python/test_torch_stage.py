"""Tests of timelyfreeze_plan's torch hook (tools/python/timelyfreeze_plan/
torch_stage.py) on torch.distributed.pipelining stages.

Run by ctest with TF_TORCH_PYTHON; exits 77 (skipped) where torch 2.4 or
newer is missing, or fails there when TF_REQUIRE_TORCH=1
(torch_harness.require_torch)."""
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "tools", "python"))

import torch_harness  # noqa: E402
from test_timelyfreeze_plan import plan_doc  # noqa: E402
from timelyfreeze_plan import FreezeSchedule, parse_plan  # noqa: E402


class FreezeHandleTest(unittest.TestCase):
    """The hook's mechanism on a stand-in for a pipeline stage whose
    forward_one_chunk records the graph of one microbatch, and a backward
    per microbatch afterwards, 1F1B-like (forward of microbatch 1 before
    backward of microbatch 0)."""

    @staticmethod
    def stage_with_hook():
        """The stand-in stage (a Linear 4->4 and a Linear 4->1) and its
        handle, freezing by a plan of two microbatches of which the first
        freezes half (in rotation: the first Linear's weight and bias)."""
        import torch
        from timelyfreeze_plan.torch_stage import FreezeHandle

        class Stage:
            stage_index = 0

            def __init__(self):
                torch.manual_seed(1)
                self.submod = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 1))
                self.outputs = {}

            def forward_one_chunk(self, fwd_chunk_id, x):
                self.outputs[fwd_chunk_id] = self.submod(x).sum()

        stage = Stage()
        plan = parse_plan(plan_doc(ranks=1, microbatches=2, ratios={(0, 0): 0.5}))
        sched = FreezeSchedule(plan, [4], "rotate", warmup=0, ramp=0)
        handle = FreezeHandle(stage, sched, 0, [])
        handle.wrap("forward_one_chunk", handle.forward_one_chunk)
        return stage, handle, Stage

    def test_frozen_weight_keeps_no_input(self):
        # A Linear keeps its input only for its weight's gradient: the
        # microbatch that froze the first Linear saves no reference to the
        # stage input (which needs a gradient, so the graph exists), the
        # other one does.
        import torch
        stage, handle, _ = self.stage_with_hook()
        x = torch.randn(2, 4, requires_grad=True)
        saved = {}
        for m in (0, 1):
            packed = []
            with torch.autograd.graph.saved_tensors_hooks(lambda t: packed.append(t) or t,
                                                          lambda t: t):
                stage.forward_one_chunk(m, x)
            saved[m] = [t.data_ptr() for t in packed]
        self.assertEqual(handle.masks[0], [True, True, False, False])
        self.assertNotIn(x.data_ptr(), saved[0])
        self.assertIn(x.data_ptr(), saved[1])

    def test_frozen_parameters_skip_their_weight_gradient(self):
        import torch
        stage, handle, Stage = self.stage_with_hook()
        x = torch.randn(2, 4)
        stage.forward_one_chunk(0, x)
        stage.forward_one_chunk(1, x)
        self.assertTrue(all(p.requires_grad for p in stage.submod.parameters()))
        stage.outputs[0].backward()
        grads = [p.grad for p in stage.submod.parameters()]
        self.assertEqual(handle.masks[0], [True, True, False, False])
        self.assertEqual([g is None for g in grads], [True, True, False, False])
        stage.outputs[1].backward()       # microbatch 1 froze nothing
        self.assertTrue(all(p.grad is not None for p in stage.submod.parameters()))
        stage.forward_one_chunk(0, x)     # the next step
        self.assertEqual(handle.step, 1)
        self.assertEqual(handle.masks[0], [False, False, True, True])
        wrapped = stage.forward_one_chunk
        handle.detach()
        self.assertNotEqual(stage.forward_one_chunk, wrapped)
        self.assertEqual(stage.forward_one_chunk.__func__, Stage.forward_one_chunk)


# Schedules whose backwards run as I (input gradient) then W (weights).
SPLIT_BACKWARD = ("InterleavedZeroBubble", "ZBVZeroBubble")


def step_plan(stages):
    """Freeze and recompute ratios of every (stage, microbatch) of a step,
    every value from 0 to 1 in quarters (freeze) and halves (recompute), and
    microbatch 1 freezing all of stage 0: that stage's output for it has no
    graph; PyTorch leaves such an output out of its backward call, so that
    backward does nothing, as freezing means, while the later stages still
    train on the microbatch."""
    cells = [(s, m) for s in range(stages) for m in range(torch_harness.MICROBATCHES)]
    ratios = {(s, m): ((3 * s + 5 * m) % 5) / 4 for s, m in cells}
    ratios[(0, 1)] = 1.0
    recompute = {(s, m): ((s + 2 * m) % 3) / 2 for s, m in cells}
    return ratios, recompute


class PipelineStageTest(unittest.TestCase):
    """Real PipelineStages with the hook attached, over gloo: each microbatch's
    graph holds exactly the tensors the plan leaves unfrozen, its planned
    share of layers (the first ones) runs again in its backward, and each
    tensor's gradient
    is the sum over the microbatches that did not freeze it, as plain
    autograd on the whole model computes it."""

    def run_pipelines(self, ranks, runs):
        """Runs each of runs, (schedule, stages, ratios, recompute, method,
        seed), on `ranks` processes with model() in `stages` stages, frozen
        by a plan of `ratios` ({(stage, microbatch): ratio}) and `recompute`
        (recompute ratios, the same keys); checks every stage of each;
        returns the masks of each run."""
        plans = []
        for schedule, stages, ratios, recompute, method, seed in runs:
            plan = parse_plan(plan_doc(ranks=stages, microbatches=torch_harness.MICROBATCHES,
                                       ratios=ratios, recompute=recompute))
            plans.append((schedule, stages, FreezeSchedule(
                plan, torch_harness.stage_tensors(stages), method, seed=seed, warmup=0,
                ramp=0)))
        results = torch_harness.run_ranks(torch_harness.pipeline_steps, ranks, plans)
        masks = []
        for i, (schedule, stages, freezing) in enumerate(plans):
            result = torch_harness.merged([per_rank[i] for per_rank in results])
            self.assertEqual(sorted(result["stages"]), list(range(stages)), schedule)
            for stage, got in result["stages"].items():
                with self.subTest(schedule=schedule, stage=stage):
                    self.check_stage(stage, stages, got, freezing, schedule in SPLIT_BACKWARD)
            self.assertGreater(sum(sum(got["runs"]["backward"])
                                   for got in result["stages"].values()), 0,
                               f"{schedule}: no layer was recomputed")
            masks.append({stage: got["masks"] for stage, got in result["stages"].items()})
        return masks

    def check_stage(self, stage, stages, got, freezing, split):
        import torch
        masks = freezing.stage_choices(0, stage)
        self.assertEqual(got["masks"], masks)
        for m, mask in enumerate(masks):
            self.assertEqual(got["in_graph"][m], [i for i, f in enumerate(mask) if not f],
                             f"microbatch {m}: the tensors in its graph")
        layers = got["layer_tensors"]
        recomputed = [freezing.recompute_count(stage, m, len(layers)) for m in range(len(masks))]
        self.assertEqual(got["recomputed"], recomputed)
        self.assertEqual(got["runs"]["forward"], [len(masks)] * len(layers))
        self.assertEqual(got["runs"]["backward"],
                         [sum(self.recomputations(stage, layers, j, mask, split)
                              for n, mask in zip(recomputed, masks) if j < n)
                          for j in range(len(layers))], "layers run again in backwards")
        want = torch_harness.expected_grads(stage, stages, masks)
        for i, (grad, expected) in enumerate(zip(got["grads"], want)):
            where = f"stage {stage} tensor {i}"
            if expected is None:
                self.assertTrue(grad is None or not torch.any(grad), where)
            else:
                self.assertTrue(torch.allclose(grad, expected, atol=1e-6), where)

    @staticmethod
    def recomputations(stage, layers, j, mask, split):
        """How often the backward of a microbatch frozen by `mask` runs
        layer j (of `layers`, each the indices of its tensors) again when
        layer j is checkpointed: once if the layer recorded a graph (on
        stage 0, whose input needs no gradient, only once a tensor up to it
        is unfrozen; elsewhere always).  A split backward (I then W, two
        autograd calls) runs it in I, and again in W if W trains one of its
        tensors; stage 0 of a split schedule skips I (it has no input
        gradient to compute) and runs its whole backward in W."""
        if stage > 0 and split:
            return 1 + any(not mask[i] for i in layers[j])
        return stage > 0 or any(not mask[i] for layer in layers[:j + 1] for i in layer)

    def test_gpipe_one_stage(self):
        masks = self.run_pipelines(1, [("GPipe", 1, {(0, 0): 0.5, (0, 2): 1.0, (0, 3): 0.25},
                                        {(0, 2): 0.5, (0, 3): 1.0}, "random", 5)])
        self.assertEqual(masks[0][0][2], [True] * 16)

    def run_schedules(self, ranks):
        """Each kind of schedule on `ranks` processes: GPipe and 1F1B (one
        stage per rank), Interleaved1F1B (two), and the split-backward
        InterleavedZeroBubble and ZBVZeroBubble (two), whose backwards run as
        I (input gradient) and later W (weight gradient): freezing at the
        forward must drop the frozen tensors from W."""
        runs = []
        for schedule, per_rank, method in (("GPipe", 1, "random"), ("1F1B", 1, "rotate"),
                                           ("Interleaved1F1B", 2, "random"),
                                           ("InterleavedZeroBubble", 2, "rotate"),
                                           ("ZBVZeroBubble", 2, "random")):
            stages = ranks * per_rank
            runs.append((schedule, stages, *step_plan(stages), method, ranks))
        for masks in self.run_pipelines(ranks, runs):
            self.assertTrue(all(masks[0][1]))

    def test_schedules_on_two_ranks(self):
        self.run_schedules(2)

    def test_schedules_on_four_ranks(self):
        self.run_schedules(4)


class AnnotateTest(unittest.TestCase):
    """timelyfreeze_plan.annotate: the single-stage schedules' actions get
    the multi-stage runtime's PP: names, once each; a runtime schedule is
    left to name its own, once each too."""

    def test_annotate_on_two_ranks(self):
        m = torch_harness.MICROBATCHES
        results = torch_harness.run_ranks(torch_harness.pipeline_steps, 2, [
            ("1F1B", 2, None, True), ("GPipe", 2, None, True), ("Interleaved1F1B", 4, None, True)])
        one_f_one_b = {
            0: ["0F0", "0F1"] + [a for i in range(m - 2) for a in (f"0B{i}", f"0F{i + 2}")]
               + [f"0B{m - 2}", f"0B{m - 1}"],
            1: [f"1{k}{i}" for i in range(m) for k in ("F", "B")]}
        for rank, runs in enumerate(results):
            one, gpipe, interleaved = (r["spans"] for r in runs)
            self.assertEqual(one, ["PP:" + a for a in one_f_one_b[rank]])
            self.assertEqual(gpipe, [f"PP:{rank}{k}{i}" for k in ("F", "B") for i in range(m)])
            self.assertEqual(sorted(interleaved),
                             sorted(f"PP:{s}{k}{i}" for s in (rank, rank + 2) for k in ("F", "B")
                                    for i in range(m)))


if __name__ == "__main__":
    torch_harness.require_torch()
    unittest.main()
