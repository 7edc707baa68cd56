"""The two studies and their arms.

shifted  2 ranks, 1F1B, 4 microbatches: pretrain on the built-in source
         "base", fine-tune on "shifted" (the same Markov chain with a
         quarter of its pairs redrawn).
text     the published shape: 4 ranks, 8 microbatches, 1F1B and
         ZBVZeroBubble (8 stages, so 8 layers), pretrain on Python sources,
         fine-tune on C headers (data.py says which files and why).

An arm is one way of freezing during fine-tuning; its name says what it
runs: "plan-<plan>-<choice>" trains with a plan (lf: least-freeze, spread,
actcap: least-freeze under tf-plan --max-action-ratio) and a tensor choice
(tf-exec --freeze-select random, rotate or stable; "rescaled" is random with
--freeze-rescale).
"""

ARM_WHY = {
    "no-freeze": "the reference",
    "plan-lf-random": "the method as the reference implements it",
    "plan-lf-rotate": "the plan, tensors taken in turn",
    "plan-lf-stable": "the plan, the tensors whose gradients have settled",
    "plan-spread-random": "the spread plan (smallest largest ratio)",
    "plan-spread-rotate": "the spread plan, tensors taken in turn",
    "plan-lf-rescaled": "plan-lf-random with --freeze-rescale",
    "plan-actcap-random": "the plan with no action above the cap",
    "uniform": "the lf plan's mean ratio on every backward",
    "cap": "every backward at the cap",
}

STUDIES = {
    "shifted": dict(
        title="built-in sources, base then shifted",
        data="builtin",
        pretrain_pipeline=("1F1B", 2, 4),
        pipelines=[("1F1B", 2, 4)],
        arms=["no-freeze", "plan-lf-random", "plan-lf-rotate", "plan-lf-stable",
              "plan-spread-random", "plan-spread-rotate", "uniform", "cap",
              "plan-lf-rescaled", "plan-actcap-random"],
        sizes={
            # narrower than tf-exec's default (192), so that 30 fine-tuning
            # runs fit in about half an hour on 2 cores
            "default": dict(pretrain=600, steps=240, evals=12, seeds=[1, 2, 3],
                            model=["--layers", "4", "--hidden", "128", "--context", "64"],
                            microbatch_size=8, pretrain_microbatch_size=8),
            "quick": dict(pretrain=40, steps=24, evals=4, seeds=[1, 2],
                          model=["--layers", "2", "--hidden", "32", "--heads", "2",
                                 "--context", "16"],
                          microbatch_size=2, pretrain_microbatch_size=2),
        }),
    "text": dict(
        title="Python sources, then C headers",
        data="text",
        # Pretraining freezes nothing, so its pipeline only sets its speed:
        # 2 ranks on 2 cores, larger microbatches.
        pretrain_pipeline=("1F1B", 2, 4),
        pipelines=[("1F1B", 4, 8), ("ZBVZeroBubble", 4, 8)],
        arms=["no-freeze", "plan-lf-random", "plan-lf-stable", "plan-actcap-random",
              "uniform", "cap"],
        sizes={
            # 8 layers: ZBVZeroBubble on 4 ranks has 8 stages of one block
            # each; 64 wide and 2 x 64 tokens per microbatch, so that 36
            # fine-tuning runs fit in about 45 minutes on 2 cores
            "default": dict(pretrain=800, steps=200, evals=10, seeds=[1, 2, 3],
                            model=["--layers", "8", "--hidden", "64", "--heads", "4",
                                   "--context", "64"],
                            microbatch_size=2, pretrain_microbatch_size=8),
            "quick": dict(pretrain=20, steps=16, evals=4, seeds=[1, 2],
                          model=["--layers", "8", "--hidden", "16", "--heads", "2",
                                 "--context", "16"],
                          microbatch_size=1, pretrain_microbatch_size=2),
        }),
}


def pipeline_options(schedule, ranks, microbatches):
    return ["--schedule", schedule, "--ranks", str(ranks), "--microbatches", str(microbatches)]


def plan_keys(arms):
    """The plans the arms need ("lf" always: uniform takes its mean)."""
    keys = ["lf"]
    for arm in arms:
        if arm.startswith("plan-") and arm.split("-")[1] not in keys:
            keys.append(arm.split("-")[1])
    return keys


def plan_solve_options(key, cap):
    """tf-plan's options for plan `key`."""
    if key == "spread":
        return ["--objective", "spread"]
    if key == "actcap":
        return ["--objective", "least-freeze", "--max-action-ratio", str(cap)]
    return ["--objective", "least-freeze"]


def arm_options(arm, plans, mean_ratio, cap):
    """tf-exec's freezing options for an arm; plans maps a plan key to its
    file."""
    if arm == "no-freeze":
        return ["--no-freeze"]
    if arm == "uniform":
        return ["--freeze-ratio", "%.6f" % mean_ratio]
    if arm == "cap":
        return ["--freeze-ratio", "%.6f" % cap]
    _, key, choice = arm.split("-")
    opts = ["--plan", plans[key]]
    if choice == "rescaled":
        return opts + ["--freeze-select", "random", "--freeze-rescale"]
    return opts + ["--freeze-select", choice]


def arm_ratios(arm, plan_docs, mean_ratio, cap):
    """The freeze ratio of every backward (stage, microbatch) once the ramp
    is done, as {(stage, microbatch): ratio}; plan_docs maps a plan key to
    its parsed plan.json (any plan gives the shape)."""
    shape = plan_docs["lf"]
    keys = [(a["stage"], a["microbatch"]) for a in shape["actions"] if a["type"] in ("B", "W")]
    if arm.startswith("plan-"):
        doc = plan_docs[arm.split("-")[1]]
        return {(a["stage"], a["microbatch"]): a["freeze_ratio"]
                for a in doc["actions"] if a["type"] in ("B", "W")}
    level = {"no-freeze": 0.0, "uniform": mean_ratio, "cap": cap}[arm]
    return {k: level for k in keys}
