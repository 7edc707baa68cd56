"""Which parameter tensors each backward freezes: tf-exec's rules, bit for
bit (executor/include/tfx/rng.h, executor/src/freeze_select.c and the
training loop of executor/src/exec.c)."""
import math

_MASK = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15
# The coordinate tfx_freeze_select mixes into every draw, so the freezing
# stream is unrelated to the executor's other random numbers.
_FREEZE_STREAM = 0xF2EE5E


class Rng:
    """splitmix64, as tfx_rng: 64-bit state, wrapping arithmetic."""

    def __init__(self, state):
        self.state = state & _MASK

    def next(self):
        """The next 64 random bits (tfx_rng_next)."""
        self.state = (self.state + _GOLDEN) & _MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
        return z ^ (z >> 31)

    def uniform(self):
        """A double in [0, 1) from the top 53 bits (tfx_rng_uniform)."""
        return float(self.next() >> 11) * (1.0 / 9007199254740992.0)

    @classmethod
    def for_coords(cls, seed, a, b, c):
        """The generator of coordinates (seed, a, b, c) (tfx_rng_for)."""
        r = cls(seed ^ 0x5DEECE66D)
        for i, k in enumerate((a, b, c)):
            r.state ^= (k + _GOLDEN * (i + 1)) & _MASK
            r.next()
        return r


def freeze_count(ratio, k_tensors):
    """round(ratio K) for ratio clamped to [0, 1], halves up
    (tfx_freeze_count)."""
    if not ratio > 0.0:         # also NaN
        return 0
    ratio = min(ratio, 1.0)
    return min(int(math.floor(ratio * k_tensors + 0.5)), k_tensors)


def phase_factor(step, warmup=10, ramp=10, no_freeze=False):
    """The share of the plan's ratios applied at step (0-based), as tf-exec:
    0 during the warm-up, then rising linearly to 1 over `ramp` steps."""
    if no_freeze or step < warmup:
        return 0.0
    if ramp <= 0:
        return 1.0
    return min((step - warmup + 1) / ramp, 1.0)


class FreezeSelector:
    """tfx_freeze_selector: chooses the frozen tensors of one backward.

    method "random": k tensors drawn without replacement, weights from 1.0
    (first tensor) down to 0.1 (last) on stage 0, uniform elsewhere; the
    draw depends only on (seed, step, stage, microbatch).  method "rotate":
    each stage's tensors in turn, k at a time; calls for one stage must come
    in execution order (step, then microbatch)."""

    def __init__(self, stage_tensors, method="random", seed=1):
        if method not in ("random", "rotate"):
            raise ValueError(f"method {method!r}: expected random or rotate")
        if any(not isinstance(k, int) or k < 0 for k in stage_tensors):
            raise ValueError(f"stage_tensors {stage_tensors!r}: expected counts >= 0")
        self.method = method
        self.seed = seed & _MASK
        self.stage_tensors = list(stage_tensors)
        self.rotate_offset = [0] * len(self.stage_tensors)

    def select(self, step, stage, microbatch, ratio):
        """A list of K booleans, True for each frozen tensor of stage."""
        K = self.stage_tensors[stage]
        k = freeze_count(ratio, K)
        frozen = [False] * K
        if k == 0:
            return frozen
        if self.method == "rotate":
            off = self.rotate_offset[stage]
            for j in range(k):
                frozen[(off + j) % K] = True
            self.rotate_offset[stage] = (off + k) % K
            return frozen
        return self._draw(step, stage, microbatch, k, frozen)

    def _draw(self, step, stage, microbatch, k, frozen):
        K = len(frozen)
        w = [1.0 - 0.9 * i / (K - 1) if stage == 0 and K > 1 else 1.0 for i in range(K)]
        total = 0.0
        for x in w:                 # summed in order, as the C loop does
            total += x
        coord = ((stage & 0xFFFFFFFF) << 32) | (microbatch & 0xFFFFFFFF)
        r = Rng.for_coords(self.seed, _FREEZE_STREAM, step & _MASK, coord)
        for _ in range(k):
            x = r.uniform() * total
            pick = -1
            for i in range(K):
                if frozen[i]:
                    continue
                pick = i            # the last eligible one absorbs rounding
                if x < w[i]:
                    break
                x -= w[i]
            frozen[pick] = True
            total -= w[pick]
        return frozen


class FreezeSchedule:
    """A plan applied over a run: for each step, the frozen tensors of every
    (stage, microbatch), as tf-exec's training loop chooses them (ratio x
    phase_factor, stages in order, microbatches in order).

    stage_tensors[s] is K for stage s: the number of parameter tensors of
    that stage, in the order of its module's parameters()."""

    def __init__(self, plan, stage_tensors, method="random", seed=1, warmup=10, ramp=10,
                 no_freeze=False):
        if len(stage_tensors) != plan.stages:
            raise ValueError(f"stage_tensors has {len(stage_tensors)} entries, the plan "
                             f"{plan.stages} stages")
        self.plan = plan
        self.selector = FreezeSelector(stage_tensors, method, seed)
        self.warmup, self.ramp, self.no_freeze = warmup, ramp, no_freeze
        self._cache = {}            # stage -> (step, masks)

    def stage_choices(self, step, stage):
        """The masks of microbatches 0..M-1 of stage at step.  Asking twice
        for one step returns the same masks; under "rotate", ask for every
        step of a stage in order, as tf-exec runs them."""
        cached = self._cache.get(stage)
        if cached and cached[0] == step:
            return cached[1]
        factor = phase_factor(step, self.warmup, self.ramp, self.no_freeze)
        masks = [self.selector.select(step, stage, m, self.plan.ratio(stage, m) * factor)
                 for m in range(self.plan.microbatches)]
        self._cache[stage] = (step, masks)
        return masks

    def step_choices(self, step):
        """{(stage, microbatch): mask} for every stage at step."""
        return {(s, m): mask for s in range(self.plan.stages)
                for m, mask in enumerate(self.stage_choices(step, s))}
