"""The PyTorch environment works (tools/torch-env, made by
bash tools/bootstrap.sh pytorch): torch imports, two processes exchange
tensors with gloo on the CPU, and torch.distributed.pipelining runs one
two-stage Schedule1F1B step that gives plain autograd's answer.

Run by ctest with TF_TORCH_PYTHON; exits 77 (skipped) where torch is missing,
or fails there when TF_REQUIRE_TORCH=1 (torch_harness.require_torch)."""
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "tools", "python"))

import torch_harness  # noqa: E402


def gloo_exchange(rank, world):
    """Rank 0 sends [1, 2, 3] to rank 1; every rank adds rank + 1 with all_reduce."""
    import torch
    import torch.distributed as dist
    received = torch.zeros(3)
    if rank == 0:
        dist.send(torch.tensor([1.0, 2.0, 3.0]), dst=1)
    else:
        dist.recv(received, src=0)
    total = torch.tensor([float(rank + 1)])
    dist.all_reduce(total)
    return {"received": received, "sum": float(total), "backend": dist.get_backend()}


class TorchTest(unittest.TestCase):
    def test_imports_and_computes_on_the_cpu(self):
        import torch
        import torch.distributed as dist
        from torch.distributed import pipelining  # noqa: F401
        self.assertTrue(dist.is_available())
        self.assertTrue(dist.is_gloo_available())
        a = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
        self.assertEqual((a @ a).tolist(), [[7.0, 10.0], [15.0, 22.0]])

    def test_asking_for_a_gpu_answers_instead_of_crashing(self):
        # With the stand-in CUDA libraries a CUDA call must fail softly:
        # torch asks cudaGetDeviceCount, which the stand-in answers "no device".
        import torch
        available = torch.cuda.is_available()
        self.assertIsInstance(available, bool)
        if not available:
            self.assertEqual(torch.cuda.device_count(), 0)

    def test_gloo_send_recv_and_all_reduce_between_two_processes(self):
        results = torch_harness.run_ranks(gloo_exchange, 2)
        self.assertEqual(results[1]["received"].tolist(), [1.0, 2.0, 3.0])
        self.assertEqual([r["sum"] for r in results], [3.0, 3.0])
        self.assertEqual(results[0]["backend"], "gloo")

    def test_two_stage_1f1b_step_matches_autograd(self):
        import torch
        result = torch_harness.merged(torch_harness.run_ranks(torch_harness.pipeline_step, 2))
        losses, _, output = torch_harness.reference(2)
        self.assertEqual(len(result["losses"]), len(losses))
        for got, want in zip(result["losses"], losses):
            self.assertAlmostEqual(got, want, places=5)
        self.assertTrue(torch.allclose(result["output"], output, atol=1e-6))
        for stage in (0, 1):
            got = result["stages"][stage]["grads"]
            want = torch_harness.expected_grads(stage, 2)
            self.assertEqual(len(got), len(want))
            for i, (g, w) in enumerate(zip(got, want)):
                self.assertTrue(torch.allclose(g, w, atol=1e-6), f"stage {stage} tensor {i}")


if __name__ == "__main__":
    torch_harness.require_torch()
    unittest.main()
