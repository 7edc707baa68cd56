"""timelyfreeze_plan: apply a TimelyFreeze plan (tf-plan's plan.json) in a
PyTorch pipeline run.

Standard library only, except `attach` and `annotate`, which import torch
when called:

    from timelyfreeze_plan import load_plan, FreezeSchedule, attach, annotate
    plan = load_plan("plan.json")
    schedule = FreezeSchedule(plan, stage_tensors=[len(list(m.parameters())) for m in stages])
    annotate(pipe)      # PP: profiler spans for ScheduleGPipe and Schedule1F1B
    handles = [attach(stage, schedule) for stage in my_pipeline_stages]

The choice of tensors follows tf-exec's rules exactly (executor/src/
freeze_select.c): a backward action with freeze ratio r freezes round(r K)
of its stage's K parameter tensors (halves round up), drawn at random with
weights falling from 1.0 to 0.1 over stage 0's tensors (uniform elsewhere)
with the executor's random numbers, or taken in rotation; the plan's ratios
are applied after a warm-up and ramped in as tf-exec does.  For the same
plan, seed and step the module chooses exactly what tf-exec chooses.
"""
__version__ = "0.1.0"  # the toolkit's version (CMakeLists.txt's project())

from .plan import Plan, PlanError, load_plan, parse_plan, rank_stages
from .selection import (FreezeSchedule, FreezeSelector, Rng, freeze_count,
                        phase_factor)


def attach(stage, schedule, first_step=0, layers=None):
    """Freezes the chosen tensors, and checkpoints the planned share of
    `layers`, in each microbatch's forward on a torch.distributed.pipelining
    stage (torch >= 2.4); see torch_stage."""
    from .torch_stage import attach as _attach
    return _attach(stage, schedule, first_step, layers)


def annotate(pipe):
    """Names each action of a single-stage schedule's stage in the
    profiler as PyTorch's multi-stage runtime does ("PP:0F3"); see
    torch_stage."""
    from .torch_stage import annotate as _annotate
    return _annotate(pipe)


__all__ = ["Plan", "PlanError", "load_plan", "parse_plan", "rank_stages", "FreezeSchedule",
           "FreezeSelector", "Rng", "freeze_count", "phase_factor", "attach", "annotate"]
