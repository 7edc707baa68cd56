"""Prints the tensors a plan freezes, step by step, as tf-exec chooses them:

    python3 -m timelyfreeze_plan plan.json --tensors 6,6 [--method random|rotate]
        [--seed 1] [--steps 20] [--warmup 10] [--ramp 10]

One line per (step, stage, microbatch): the step, the stage, the
microbatch, and one digit per parameter tensor of the stage (1 = frozen).
"""
import argparse
import sys

from .plan import PlanError, load_plan
from .selection import FreezeSchedule


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m timelyfreeze_plan",
                                 description="the tensors a plan freezes, as tf-exec chooses them")
    ap.add_argument("plan")
    ap.add_argument("--tensors", required=True,
                    help="parameter tensors per stage, comma-separated (K0,K1,...)")
    ap.add_argument("--method", choices=("random", "rotate"), default="random")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--ramp", type=int, default=10)
    args = ap.parse_args(argv)
    try:
        plan = load_plan(args.plan)
        tensors = [int(k) for k in args.tensors.split(",")]
        schedule = FreezeSchedule(plan, tensors, args.method, args.seed, args.warmup, args.ramp)
    except (OSError, PlanError, ValueError) as e:
        print(f"timelyfreeze_plan: {e}", file=sys.stderr)
        return 1
    for step in range(args.steps):
        for (stage, mb), mask in sorted(schedule.step_choices(step).items()):
            print(step, stage, mb, "".join("1" if f else "0" for f in mask))
    return 0


if __name__ == "__main__":
    sys.exit(main())
