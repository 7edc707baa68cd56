#!/usr/bin/env python3
"""Capture torch.profiler traces of a small two-rank pipeline on the CPU.

The traces are the test fixtures of tf-import (tests/import/fixtures/).  Two
processes (torch.distributed, gloo) each hold one stage of a small MLP and run
a 1F1B order of 4 microbatches per step.  Every action runs inside
torch.profiler.record_function("PP:" + action) and the receives are split
from the compute as PyTorch's pipelining runtime does it
(torch/distributed/pipelining/schedules.py, _PipelineScheduleRuntime.
_step_microbatches): a `PP:<stage>RECV_F<mb>` / `PP:<stage>RECV_B<mb>` action
posts the irecv, and the compute action that needs the data waits for it
inside its own span; a `PP:<stage>SEND_F<mb>` / `PP:<stage>SEND_B<mb>` action
posts the isend after it.

Run it twice in one call, once training every parameter and once with every
parameter frozen (requires_grad False, so backward computes no weight
gradient), each profiled over a few steps (torch.profiler schedule: one step
skipped, one warm-up step, then --steps recorded steps, each a
ProfilerStep#N span):

    /usr/bin/python3 tools/reference/capture_pipeline_traces.py --out DIR

writes DIR/unfrozen/rank0.json, rank1.json and DIR/frozen/rank0.json,
rank1.json (Chrome traces as torch.profiler exports them); with --gzip the
unfrozen run's last rank is written as rank1.json.gz instead (torch.profiler
compresses a trace whose name ends in .gz, as TensorBoard's handler does).  With --memory the
profiler records every allocation and free (profile_memory=True: Kineto's "[memory]" instant
events, what tf-import reads the memory fields from; Kineto builds only).  Needs torch with
torch.distributed and gloo (Debian 12's python3-torch 1.13 has them); no GPU.
"""
import argparse
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.profiler import ProfilerActivity, profile, record_function, schedule

from torch_pipeline import block  # the residual MLP block of the torch 2 runs too

RANKS = 2
MICROBATCHES = 4
BATCH = 32          # rows per microbatch
WIDTH = 512         # features of every layer
LAYERS = 1          # residual MLP blocks per stage (more would only add events)
TAG_BACKWARD = 1000 # gloo tags: forward activations use the microbatch, gradients this + it


def one_f_one_b(rank, ranks, microbatches):
    """The 1F1B order of a rank: min(P - r, M) forwards, then B and F
    alternate until the forwards run out, then the remaining B."""
    order = []
    warmup = min(ranks - rank, microbatches)
    order += [("F", m) for m in range(warmup)]
    f, b = warmup, 0
    while b < microbatches:
        order.append(("B", b))
        b += 1
        if f < microbatches:
            order.append(("F", f))
            f += 1
    return order


def make_stage(rank, frozen):
    torch.manual_seed(1234 + rank)
    stage = torch.nn.Sequential(*[block(WIDTH) for _ in range(LAYERS)])
    for p in stage.parameters():
        p.requires_grad_(not frozen)
    return stage


class Runner:
    """Runs one rank's actions for one step, as the pipelining runtime would."""

    def __init__(self, rank, stage, frozen):
        self.rank, self.stage, self.frozen = rank, stage, frozen
        self.last = rank == RANKS - 1
        self.inputs, self.outputs, self.pending = {}, {}, {}
        self.sends = []

    def recv(self, kind, m):
        with record_function(f"PP:{self.rank}RECV_{kind}{m}"):
            buf = torch.empty(BATCH, WIDTH)
            peer = self.rank - 1 if kind == "F" else self.rank + 1
            tag = m if kind == "F" else TAG_BACKWARD + m
            self.pending[(kind, m)] = (dist.irecv(buf, peer, tag=tag), buf)

    def send(self, kind, m, tensor):
        with record_function(f"PP:{self.rank}SEND_{kind}{m}"):
            peer = self.rank + 1 if kind == "F" else self.rank - 1
            tag = m if kind == "F" else TAG_BACKWARD + m
            self.sends.append(dist.isend(tensor.contiguous(), peer, tag=tag))

    def wait(self, kind, m):
        work, buf = self.pending.pop((kind, m))
        work.wait()
        return buf

    def forward(self, m, data, target):
        if self.rank > 0:
            self.recv("F", m)
        with record_function(f"PP:{self.rank}F{m}"):
            x = data[m] if self.rank == 0 else self.wait("F", m)
            # Gradients flow back to the previous stage through the input.
            x.requires_grad_(self.rank > 0)
            y = self.stage(x)
            if self.last:
                y = torch.nn.functional.mse_loss(y, target[m])
            self.inputs[m], self.outputs[m] = x, y
        if not self.last:
            self.send("F", m, y.detach())

    def backward(self, m):
        if not self.last:
            self.recv("B", m)
        with record_function(f"PP:{self.rank}B{m}"):
            grad = None if self.last else self.wait("B", m)
            x, y = self.inputs.pop(m), self.outputs.pop(m)
            # Stage 0 frozen: nothing before it needs a gradient and no weight
            # wants one, so there is nothing to compute.
            if y.requires_grad:
                y.backward(grad)
        if self.rank > 0:
            self.send("B", m, x.grad)

    def step(self, data, target):
        for kind, m in one_f_one_b(self.rank, RANKS, MICROBATCHES):
            if kind == "F":
                self.forward(m, data, target)
            else:
                self.backward(m)
        for work in self.sends:
            work.wait()
        self.sends = []


def trace_path(out_dir, rank, gzip):
    return os.path.join(out_dir, f"rank{rank}.json" + (".gz" if gzip else ""))


def worker(rank, args, frozen, out_dir, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=RANKS)
    stage = make_stage(rank, frozen)
    trainable = [p for p in stage.parameters() if p.requires_grad]
    optim = torch.optim.SGD(trainable, lr=1e-3) if trainable else None
    gen = torch.Generator().manual_seed(99)
    runner = Runner(rank, stage, frozen)
    total = 2 + args.steps
    sched = schedule(wait=1, warmup=1, active=args.steps, repeat=1)
    path = trace_path(out_dir, rank, args.gzip and not frozen and rank == RANKS - 1)

    def save(prof):
        prof.export_chrome_trace(path)

    with profile(activities=[ProfilerActivity.CPU], schedule=sched, on_trace_ready=save,
                 profile_memory=args.memory) as prof:
        for _ in range(total):
            data = [torch.randn(BATCH, WIDTH, generator=gen) for _ in range(MICROBATCHES)]
            target = [torch.randn(BATCH, WIDTH, generator=gen) for _ in range(MICROBATCHES)]
            runner.step(data, target)
            if optim:
                optim.step()
                optim.zero_grad(set_to_none=True)
            dist.barrier()
            prof.step()
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="folder for unfrozen/ and frozen/")
    ap.add_argument("--steps", type=int, default=3, help="recorded steps (default 3)")
    ap.add_argument("--port", type=int, default=29517, help="rendezvous port on 127.0.0.1")
    ap.add_argument("--memory", action="store_true",
                    help="profile_memory=True: [memory] events of every allocation and free")
    ap.add_argument("--gzip", action="store_true",
                    help="write the unfrozen run's last rank as .json.gz")
    args = ap.parse_args()
    for i, frozen in enumerate((False, True)):
        out_dir = os.path.join(args.out, "frozen" if frozen else "unfrozen")
        os.makedirs(out_dir, exist_ok=True)
        mp.spawn(worker, args=(args, frozen, out_dir, args.port + i), nprocs=RANKS)
        names = [trace_path(out_dir, r, args.gzip and not frozen and r == RANKS - 1)
                 for r in range(RANKS)]
        print("wrote " + ", ".join(names), file=sys.stderr)
    print(f"torch {torch.__version__}", file=sys.stderr)


if __name__ == "__main__":
    main()
