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

    def test_frozen_parameters_skip_their_weight_gradient(self):
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
        handle = FreezeHandle(stage, sched, 0)
        stage.forward_one_chunk = handle.forward_one_chunk
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
        handle.detach()
        self.assertNotEqual(stage.forward_one_chunk, handle.forward_one_chunk)


class PipelineStageTest(unittest.TestCase):
    """A real PipelineStage with the hook attached: each tensor's gradient is
    the sum over the microbatches that did not freeze it, as plain autograd
    on the whole model computes it."""

    def run_pipeline(self, schedule, ranks, stages, ratios, method, seed):
        """Runs `schedule` on `ranks` processes with model() in `stages`
        stages, frozen by a plan of `ratios` ({(stage, microbatch): ratio});
        checks each stage's masks and gradients; returns the masks."""
        import torch
        plan = parse_plan(plan_doc(ranks=stages, microbatches=torch_harness.MICROBATCHES,
                                   ratios=ratios))
        freezing = FreezeSchedule(plan, torch_harness.stage_tensors(stages), method, seed=seed,
                                  warmup=0, ramp=0)
        result = torch_harness.merged(torch_harness.run_ranks(
            torch_harness.pipeline_step, ranks, schedule, stages, freezing))
        self.assertEqual(sorted(result["stages"]), list(range(stages)))
        for stage, got in result["stages"].items():
            self.assertEqual(got["masks"], freezing.stage_choices(0, stage))
            want = torch_harness.expected_grads(stage, stages, got["masks"])
            for i, (grad, expected) in enumerate(zip(got["grads"], want)):
                where = f"stage {stage} tensor {i}"
                if expected is None:
                    self.assertTrue(grad is None or not torch.any(grad), where)
                else:
                    self.assertTrue(torch.allclose(grad, expected, atol=1e-6), where)
        return {stage: got["masks"] for stage, got in result["stages"].items()}

    def test_gpipe_one_stage(self):
        masks = self.run_pipeline("GPipe", 1, 1, {(0, 0): 0.5, (0, 2): 1.0, (0, 3): 0.25},
                                  "random", 5)
        self.assertEqual(masks[0][2], [True] * 8)

    def test_1f1b_two_stages_with_a_first_stage_wholly_frozen(self):
        # Microbatch 1 freezes all of stage 0: its output has no graph, and
        # stage 0's backward of it must do nothing while stage 1 still
        # trains on it and the other microbatches train stage 0.
        masks = self.run_pipeline("1F1B", 2, 2, {(0, 1): 1.0, (0, 3): 0.5, (1, 2): 0.5},
                                  "rotate", 1)
        self.assertEqual(masks[0][1], [True] * 4)
        self.assertEqual(masks[0][0], [False] * 4)
        self.assertEqual(sum(masks[1][2]), 2)

    def test_split_backward_schedules(self):
        # Zero-bubble schedules run each backward as I (input gradient) and
        # later W (weight gradient); freezing at the forward must drop the
        # frozen tensors from W.  Stage 3 holds one Linear (2 tensors).
        ratios = {(0, 1): 1.0, (1, 0): 0.5, (2, 3): 0.25, (3, 2): 1.0}
        for schedule in ("InterleavedZeroBubble", "ZBVZeroBubble"):
            with self.subTest(schedule=schedule):
                masks = self.run_pipeline(schedule, 2, 4, ratios, "random", 3)
                self.assertEqual(masks[0][1], [True, True])
                self.assertEqual(masks[3][2], [True, True])


if __name__ == "__main__":
    torch_harness.require_torch()
    unittest.main()
