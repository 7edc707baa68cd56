#!/usr/bin/env python3
"""The plan tf-exec makes after rank 1 slows down tenfold on the two-rank
test model (cli_tf_exec_autoplan.sh, cli_tf_exec_launch.sh):

    replan_plan.py PLAN PROFILE    (the re-plan and the profile it came from)

Stage 1, now the whole critical path, sits at its cap (0.9); stage 0 freezes
at most 0.5; and stage 0's last backward, the one that ends the step, is
frozen whole exactly when PROFILE measured a saving for it.  Which other
stage-0 actions freeze is left to the tests' comparison with tf-plan: at
this size a stage-0 backward takes about 0.03 ms and its dW GEMMs a few
microseconds, so a shared machine's load can make a frozen one measure no
faster, or put a second one on the critical path.  Prints "ok" or what is
wrong.
"""
import json
import sys

plan, profile = (json.load(open(p)) for p in sys.argv[1:3])
ratios = plan["freeze_ratio"]["per_stage"]
key = (0, "B", 3)
last0 = [a for a in profile["actions"] if (a["stage"], a["type"], a["microbatch"]) == key]
saves = len(last0) == 1 and last0[0].get("frozen_ms", last0[0]["ms"]) < last0[0]["ms"]
ratio = [a["freeze_ratio"] for a in plan["actions"]
         if (a["stage"], a["type"], a["microbatch"]) == key]
if abs(ratios[1] - 0.9) > 1e-9 or not ratios[0] <= 0.5:
    print("the new plan freezes %r per stage, expected stage 1 at 0.9 and stage 0 at most 0.5"
          % ratios)
elif ratio != [1.0 if saves else 0.0]:
    print("stage 0's last backward freezes %r; its profile %r %s a saving"
          % (ratio, last0, "gives" if saves else "gives no"))
else:
    print("ok")
