#!/usr/bin/env python3
"""A torch.distributed.pipelining training run on the CPU, to profile, to
train with a TimelyFreeze plan, or to time a plan against no plan.

One process per rank (gloo over a file store), each holding its stages of a
stack of residual MLP blocks (LayerNorm, Linear W->2W, GELU, Linear 2W->W;
--layers blocks per stage, W = --width), run by PyTorch's own schedule class
(Schedule<NAME>) over --microbatches microbatches of --rows rows, MSE loss,
SGD.  Each rank uses --threads CPU threads (default 1: the ranks share the
machine).

    python torch_pipeline.py --schedule 1F1B [--ranks 2] [--microbatches 4]
        [--stages-per-rank V] [--layers 1] [--width 256] [--rows 32]
        [--frozen | --frozen-all | --plan PLAN.json [--method random|rotate]
         [--seed 1]]
        [--steps 10] [--warmup-steps 2]
        [--profile DIR [--gzip]]          one torch.profiler trace per rank
        [--compare --rounds 3]            with --plan: planned vs unfrozen

Without --profile it times --steps steps after --warmup-steps and prints
the median step time (a step: the schedule's step, then the optimizer; its
time is the slowest rank's, each rank timed from a barrier).  --profile DIR
records --steps steps after --warmup-steps (torch.profiler's schedule: the
first skipped, the last of them a warm-up; each recorded step a
ProfilerStep#N span) into DIR/rank<r>.json (.json.gz with --gzip), as
tf-import reads them: single-stage schedules (GPipe, 1F1B) get their
actions named by timelyfreeze_plan.annotate, the others are named by
PyTorch's runtime.  --frozen sets requires_grad False on every parameter
but the first stage's last bias (the fully frozen run tf-import's --frozen
wants: PyTorch gives a stage's received input a gradient only when the
sender's output has one, so with the first stage wholly frozen the later
stages' backwards would skip their input gradients, which a planned run
computes; that bias costs a column sum); --frozen-all freezes that one
too.  --plan attaches
timelyfreeze_plan to every stage, the plan applied from the first step (no
warm-up or ramp; the stage's blocks are its layers to recompute).
--compare times --rounds rounds of --steps planned and --steps unfrozen
steps, alternating in the same processes, and prints both medians and their
ratio: the benchmark of a plan against no plan.  --json FILE also writes
the timings.  Exit status 0, 1 on a bad plan, 2 on a usage error.
"""
import argparse
import datetime
import json
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))

from timelyfreeze_plan import (FreezeSchedule, PlanError, annotate, attach,  # noqa: E402
                               load_plan, rank_stages)

SCHEDULES = ("GPipe", "1F1B", "Interleaved1F1B", "LoopedBFS", "InterleavedZeroBubble",
             "ZBVZeroBubble", "DualPipeV")
SINGLE_STAGE = ("GPipe", "1F1B")


def block(width):
    import torch

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = torch.nn.LayerNorm(width)
            self.up = torch.nn.Linear(width, 2 * width)
            self.down = torch.nn.Linear(2 * width, width)

        def forward(self, x):
            return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))
    return Block()


def stage_module(args, stage):
    """Stage `stage`'s blocks, the same weights in every run."""
    import torch
    torch.manual_seed(1000 + stage)
    module = torch.nn.Sequential(*[block(args.width) for _ in range(args.layers)])
    for p in module.parameters():
        p.requires_grad_(not (args.frozen or args.frozen_all))
    if args.frozen and stage == 0:
        module[-1].down.bias.requires_grad_(True)
    return module


class Rank:
    """One rank's stages, schedule, optimizer and data."""

    def __init__(self, rank, args, plan):
        import torch
        from torch.distributed import pipelining
        self.rank, self.args = rank, args
        total = args.ranks * args.stages_per_rank
        self.stages = [pipelining.PipelineStage(stage_module(args, s), s, total,
                                                torch.device("cpu"),
                                                input_args=(torch.empty(args.rows, args.width),))
                       for s in rank_stages(args.schedule, rank, args.ranks, args.stages_per_rank)]
        kind = getattr(pipelining, "Schedule" + args.schedule)
        held = self.stages[0] if args.schedule in SINGLE_STAGE else self.stages
        self.pipe = kind(held, args.microbatches, loss_fn=torch.nn.functional.mse_loss)
        self.freezing = None
        if plan is not None:
            self.freezing = FreezeSchedule(plan, [len(list(stage_module(args, 0).parameters()))] *
                                           total, args.method, args.seed, warmup=0, ramp=0)
        annotate(self.pipe)
        self.handles = []
        self.plan_on(plan is not None)
        trainable = [p for s in self.stages for p in s.submod.parameters() if p.requires_grad]
        self.optimizer = torch.optim.SGD(trainable, lr=1e-4) if trainable else None
        generator = torch.Generator().manual_seed(7)
        rows = args.rows * args.microbatches
        self.x = torch.randn(rows, args.width, generator=generator)
        self.y = torch.randn(rows, args.width, generator=generator)
        self.first = any(s.is_first for s in self.stages)
        self.last = any(s.is_last for s in self.stages)

    def plan_on(self, on):
        """Attaches the plan to every stage (on) or detaches it."""
        for handle in self.handles:
            handle.detach()
        self.handles = [attach(s, self.freezing) for s in self.stages] if on else []

    def step(self):
        kwargs = {"target": self.y, "losses": []} if self.last else {}
        self.pipe.step(*((self.x,) if self.first else ()), **kwargs)
        if self.optimizer:
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)

    def timed_steps(self, n):
        """n steps; each one's time in ms, the slowest rank's."""
        import torch
        import torch.distributed as dist
        times = []
        for _ in range(n):
            dist.barrier()
            started = time.perf_counter()
            self.step()
            took = torch.tensor([(time.perf_counter() - started) * 1e3], dtype=torch.float64)
            dist.all_reduce(took, op=dist.ReduceOp.MAX)
            times.append(float(took))
        return times


def profiled(rank, args):
    """Runs --warmup-steps + --steps steps under torch.profiler, recording
    the last --steps, and writes this rank's trace."""
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile, schedule
    path = os.path.join(args.profile, f"rank{rank.rank}.json" + (".gz" if args.gzip else ""))
    plan = schedule(wait=max(args.warmup_steps - 1, 0), warmup=min(args.warmup_steps, 1),
                    active=args.steps, repeat=1)
    with profile(activities=[ProfilerActivity.CPU], schedule=plan,
                 on_trace_ready=lambda prof: prof.export_chrome_trace(path)) as prof:
        for _ in range(args.warmup_steps + args.steps):
            rank.step()
            dist.barrier()
            prof.step()
    return {"trace": path}


def measured(rank, args):
    """Timings: {"steps_ms": [...]} or, with --compare, per kind."""
    rank.timed_steps(args.warmup_steps)
    if not args.compare:
        return {"steps_ms": rank.timed_steps(args.steps)}
    out = {"planned_ms": [], "unfrozen_ms": []}
    for _ in range(args.rounds):
        for kind in ("planned", "unfrozen"):
            rank.plan_on(kind == "planned")
            out[kind + "_ms"] += rank.timed_steps(args.steps)
    return out


def rank_main(rank, args, plan, store, out):
    import torch
    import torch.distributed as dist
    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank,
                            world_size=args.ranks, timeout=datetime.timedelta(seconds=300))
    try:
        me = Rank(rank, args, plan)
        result = profiled(me, args) if args.profile else measured(me, args)
    finally:
        dist.destroy_process_group()
    if rank == 0:
        with open(out, "w", encoding="utf-8") as f:
            json.dump(result, f)


def summary(result):
    """Median and range of each list of step times, and planned/unfrozen."""
    out = {}
    for key, times in result.items():
        if isinstance(times, list):
            out[key] = {"median": statistics.median(times), "min": min(times),
                        "max": max(times), "steps": len(times)}
    if "planned_ms" in out:
        out["speedup"] = out["unfrozen_ms"]["median"] / out["planned_ms"]["median"]
    return out


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--schedule", choices=SCHEDULES, required=True)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--stages-per-rank", type=int, help="default: 1 for GPipe and 1F1B, else 2")
    ap.add_argument("--microbatches", type=int, default=4)
    ap.add_argument("--layers", type=int, default=1, help="blocks per stage")
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--rows", type=int, default=32, help="rows per microbatch")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup-steps", type=int, default=2)
    frozen = ap.add_mutually_exclusive_group()
    frozen.add_argument("--frozen", action="store_true",
                        help="freeze every parameter but the first stage's last bias")
    frozen.add_argument("--frozen-all", action="store_true", help="freeze every parameter")
    frozen.add_argument("--plan", help="a tf-plan plan.json to train with")
    ap.add_argument("--method", choices=("random", "rotate"), default="random")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--profile", metavar="DIR", help="write one trace per rank into DIR")
    ap.add_argument("--gzip", action="store_true", help="with --profile: .json.gz traces")
    ap.add_argument("--compare", action="store_true", help="with --plan: planned vs unfrozen")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", help="also write the timings to this file")
    args = ap.parse_args(argv)
    if args.stages_per_rank is None:
        args.stages_per_rank = 1 if args.schedule in SINGLE_STAGE else 2
    if args.compare and not args.plan:
        ap.error("--compare needs --plan")
    if args.compare and args.profile:
        ap.error("--compare and --profile: one at a time")
    for name in ("ranks", "stages_per_rank", "microbatches", "layers", "width", "rows",
                 "threads", "steps", "rounds"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} {getattr(args, name)}: expected 1 or more")
    return args


def load_checked_plan(args):
    """The plan of --plan, checked against the run's shape; None without."""
    if not args.plan:
        return None
    plan = load_plan(args.plan)
    stages = args.ranks * args.stages_per_rank
    if (plan.stages, plan.microbatches) != (stages, args.microbatches):
        raise PlanError(f"{args.plan}: {plan.stages} stages x {plan.microbatches} microbatches, "
                        f"the run {stages} x {args.microbatches}")
    return plan


def main(argv=None):
    args = parse_args(argv)
    try:
        plan = load_checked_plan(args)
    except (OSError, PlanError) as e:
        print(f"torch_pipeline: {e}", file=sys.stderr)
        return 1
    import torch
    import torch.multiprocessing as mp
    if args.profile:
        os.makedirs(args.profile, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "result.json")
        mp.spawn(rank_main, args=(args, plan, os.path.join(tmp, "store"), out),
                 nprocs=args.ranks, join=True)
        with open(out, encoding="utf-8") as f:
            result = json.load(f)
    if args.profile:
        print(f"wrote {args.ranks} traces into {args.profile} (torch {torch.__version__})")
        return 0
    report = {"torch": torch.__version__, "config": vars(args), "timings": result,
              "summary": summary(result)}
    for key, s in report["summary"].items():
        if isinstance(s, dict):
            print(f"{key:12s} median {s['median']:9.2f}  min {s['min']:9.2f}  "
                  f"max {s['max']:9.2f}  ({s['steps']} steps)")
    if "speedup" in report["summary"]:
        print(f"speedup      {report['summary']['speedup']:.3f}x (unfrozen / planned median)")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
