"""Reading tf-plan's plan.json: the freeze ratio of every backward action."""
import json
import math

# The newest version of plan.json this module reads (tf-plan writes it).
PLAN_VERSION = 2


class PlanError(ValueError):
    """A plan file that cannot be used; the message names the file, the
    JSON path and the value."""


class Plan:
    """What a run needs from a plan: its shape and, per (stage, microbatch),
    the freeze ratio of that microbatch's backward on that stage (the ratio
    of its B action, or of its W action where the backward is split) and its
    recompute ratio (the share of the stage's layers whose activations that
    backward recomputes instead of keeping them from the forward)."""

    def __init__(self, ranks, stages, microbatches, ratios, schedule="", recompute=None):
        self.ranks = ranks
        self.stages = stages
        self.microbatches = microbatches
        self.ratios = ratios        # {(stage, microbatch): ratio in [0, 1]}
        self.schedule = schedule
        # {(stage, microbatch): share of the forward recomputed before its
        # backward}: plans made under a memory limit (version 2)
        self.recompute = recompute or {}

    def ratio(self, stage, microbatch):
        """The planned freeze ratio of (stage, microbatch); 0 when the plan
        freezes nothing there."""
        return self.ratios.get((stage, microbatch), 0.0)

    def recompute_ratio(self, stage, microbatch):
        """The planned recompute ratio of (stage, microbatch)'s backward; 0
        when the plan recomputes nothing there."""
        return self.recompute.get((stage, microbatch), 0.0)


# PyTorch's schedules that place stages in a V: stage s on rank s for s < P,
# else on rank 2P - 1 - s (two stages per rank).
V_SCHEDULES = ("ZBVZeroBubble", "DualPipeV")


def rank_stages(schedule, rank, ranks, stages_per_rank=1):
    """The stages rank `rank` of `ranks` holds under PyTorch's schedule
    `schedule` (a name without "Schedule", e.g. "Interleaved1F1B"), in the
    order its schedule class takes them: rank, rank + P, ... (round robin),
    or rank and 2P - 1 - rank for a V schedule."""
    if schedule in V_SCHEDULES:
        return [rank, 2 * ranks - 1 - rank]
    return list(range(rank, ranks * stages_per_rank, ranks))


def _field(obj, key, kind, where, path):
    value = obj.get(key) if isinstance(obj, dict) else None
    ok = isinstance(value, kind) and not isinstance(value, bool)
    if kind is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) \
            and math.isfinite(value)
    if not ok:
        raise PlanError(f"{where}: {path}.{key}: expected a {kind.__name__}, got {value!r}")
    return value


def _ratio(a, key, where, path):
    r = float(_field(a, key, float, where, path))
    if not 0.0 <= r <= 1.0:
        raise PlanError(f"{where}: {path}.{key}: expected a number in [0, 1], got {r}")
    return r


def _count(doc, key, where):
    value = _field(doc, key, int, where, "$")
    if value < 1:
        raise PlanError(f"{where}: $.{key}: expected an integer >= 1, got {value}")
    return value


def parse_plan(doc, where="plan.json"):
    """A Plan from the parsed JSON of a plan.  Raises PlanError naming the
    field for a document that is not a tf-plan plan."""
    if not isinstance(doc, dict) or doc.get("format", "tf-plan") != "tf-plan":
        raise PlanError(f"{where}: $: expected a tf-plan plan (\"format\": \"tf-plan\")")
    version = doc.get("version", PLAN_VERSION)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise PlanError(f"{where}: $.version: expected an integer >= 1, got {version!r}")
    if version > PLAN_VERSION:
        raise PlanError(f"{where}: $.version: version {version} is newer than the tf-plan "
                        f"version this module reads ({PLAN_VERSION}): upgrade the toolkit")
    ranks, microbatches = _count(doc, "ranks", where), _count(doc, "microbatches", where)
    per_rank = doc.get("stages_per_rank", 1)
    if not isinstance(per_rank, int) or isinstance(per_rank, bool) or per_rank < 1:
        raise PlanError(f"{where}: $.stages_per_rank: expected an integer >= 1, got {per_rank!r}")
    actions = doc.get("actions")
    if not isinstance(actions, list):
        raise PlanError(f"{where}: $.actions: expected an array, got {actions!r}")
    stages, ratios, recompute = ranks * per_rank, {}, {}
    for i, a in enumerate(actions):
        path = f"$.actions[{i}]"
        kind = _field(a, "type", str, where, path)
        stage = _field(a, "stage", int, where, path)
        mb = _field(a, "microbatch", int, where, path)
        if not 0 <= stage < stages or not 0 <= mb < microbatches:
            raise PlanError(f"{where}: {path}: stage {stage}, microbatch {mb} is outside "
                            f"{stages} stages x {microbatches} microbatches")
        if kind in ("B", "W"):
            ratios[(stage, mb)] = _ratio(a, "freeze_ratio", where, path)
        if kind in ("B", "I") and "recompute_ratio" in a:
            recompute[(stage, mb)] = _ratio(a, "recompute_ratio", where, path)
    return Plan(ranks, stages, microbatches, ratios, str(doc.get("schedule", "")), recompute)


def load_plan(path):
    """Reads plan.json at path.  Raises OSError when it cannot be read and
    PlanError when it is not a usable plan."""
    with open(path, encoding="utf-8") as f:
        try:
            doc = json.load(f)
        except json.JSONDecodeError as e:
            raise PlanError(f"{path}: not JSON: {e}") from None
    return parse_plan(doc, path)
