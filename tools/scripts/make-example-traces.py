#!/usr/bin/env python3
"""Writes the small example profiles in traces/examples/.

They are synthetic: one 8-layer-per-rank LLaMA-like model on 4 ranks and 8
microbatches, with per-stage times taken from the published LLaMA-3.1-8B
per-rank averages (forward 14.46/16.16/14.34/15.50 ms, backward
42.69/45.29/40.18/45.85 ms), split evenly over the stages a rank hosts.
Frozen backward = 0.5 x backward and frozen W = 0.01 x W, the reference's
defaults when nothing was measured; I = 0.45 x B and W = 0.55 x B, a typical
dX/dW split for transformer blocks.  Re-run to regenerate; the output is
deterministic.
"""
import json
import os

FORWARD = [14.46, 16.16, 14.34, 15.50]
BACKWARD = [42.69, 45.29, 40.18, 45.85]
RANKS, MICROBATCHES = 4, 8
PROVENANCE = ("synthetic: the published LLaMA-3.1-8B per-rank averages split evenly over "
              "each rank's stages, reference defaults for frozen times "
              "(traces/README.md; tools/scripts/make-example-traces.py)")

SCHEDULES = [
    ("gpipe", "GPipe", 1),
    ("1f1b", "1F1B", 1),
    ("interleaved1f1b", "Interleaved1F1B", 2),
    ("interleaved-zb", "InterleavedZeroBubble", 2),
    ("zbv", "ZBVZeroBubble", 2),
]


def stage_rank(schedule, stage):
    if schedule == "ZBVZeroBubble":
        return stage if stage < RANKS else 2 * RANKS - 1 - stage
    return stage % RANKS


def stage_times(schedule, stages_per_rank):
    stages = []
    for stage in range(RANKS * stages_per_rank):
        rank = stage_rank(schedule, stage)
        f = FORWARD[rank] / stages_per_rank
        b = BACKWARD[rank] / stages_per_rank
        entry = {"forward_ms": round(f, 4), "backward_ms": round(b, 4),
                 "backward_frozen_ms": round(0.5 * b, 4),
                 "parameters": int(8 * 218103808 / stages_per_rank)}
        if "ZeroBubble" in schedule:
            w = 0.55 * b
            entry.update({"backward_input_ms": round(0.45 * b, 4),
                          "backward_weight_ms": round(w, 4),
                          "backward_weight_frozen_ms": round(0.01 * w, 4)})
        stages.append(entry)
    return stages


def main():
    out = os.path.join(os.path.dirname(__file__), "..", "..", "traces", "examples")
    os.makedirs(out, exist_ok=True)
    for slug, schedule, spr in SCHEDULES:
        profile = {"format": "tf-profile", "version": 1,
                   "meta": {"provenance": PROVENANCE},
                   "schedule": schedule,
                   "ranks": RANKS, "stages_per_rank": spr, "microbatches": MICROBATCHES,
                   "microbatch_tokens": 8192, "p2p_ms": 0.0, "max_freeze_ratio": 0.8,
                   "stages": stage_times(schedule, spr)}
        path = os.path.join(out, f"{slug}-p{RANKS}-m{MICROBATCHES}.profile.json")
        with open(path, "w") as f:
            json.dump(profile, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()
