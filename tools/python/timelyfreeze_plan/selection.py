"""Which parameter tensors each backward freezes: tf-exec's rules, bit for
bit (executor/include/tfx/rng.h, executor/src/random/rng.c,
executor/src/train/freeze_select.c and the training loop of
executor/src/train/train.c)."""
import math

_MASK = (1 << 64) - 1
# Threefry-4x64-20 as executor/src/random/rng.c has it: the Skein key
# parity, Threefish-256's rotation amounts by round mod 8, and the share of
# counter word 0 that counts blocks (the domain has the rest).
_KEY_PARITY = 0x1BD11BDAA9FC1A22
_ROTATIONS = ((14, 16), (52, 57), (23, 40), (5, 37), (25, 33), (46, 12), (58, 22), (32, 32))
_BLOCK_BITS = 48
# TFX_RNG_FREEZE of tfx_rng_domain (executor/include/tfx/rng.h): the domain
# of the freeze choices, apart from the executor's other random numbers.
_FREEZE_DOMAIN = 3


def _rotl(x, n):
    return ((x << n) | (x >> (64 - n))) & _MASK


def threefry4x64_20(key, counter):
    """Threefry-4x64 with 20 rounds (tfx_threefry4x64_20): four 64-bit words
    of key and counter in, four out."""
    ks = list(key) + [_KEY_PARITY ^ key[0] ^ key[1] ^ key[2] ^ key[3]]
    x = [(c + k) & _MASK for c, k in zip(counter, ks)]
    for r in range(20):
        # Even rounds mix words (0,1) and (2,3), odd rounds (0,3) and (2,1).
        p, q = (3, 1) if r & 1 else (1, 3)
        ra, rb = _ROTATIONS[r % 8]
        x[0] = (x[0] + x[p]) & _MASK
        x[p] = _rotl(x[p], ra) ^ x[0]
        x[2] = (x[2] + x[q]) & _MASK
        x[q] = _rotl(x[q], rb) ^ x[2]
        if r % 4 == 3:              # key injection s after every four rounds
            s = r // 4 + 1
            x = [(x[i] + ks[(s + i) % 5]) & _MASK for i in range(4)]
            x[3] = (x[3] + s) & _MASK
    return x


class Rng:
    """The stream (seed, domain, a, b, c) as tfx_rng has it: word i is word
    i mod 4 of Threefry-4x64-20 keyed (seed, 0, 0, 0) on the counter
    (domain << 48 | i // 4, a, b, c)."""

    def __init__(self, seed, domain, a, b, c):
        self.key = [seed & _MASK, 0, 0, 0]
        self.domain = domain & 0xFFFF
        self.coords = [a & _MASK, b & _MASK, c & _MASK]
        self.block_index = 0
        self.block = []

    def next(self):
        """The next 64 random bits (tfx_rng_next)."""
        if not self.block:
            counter = [(self.domain << _BLOCK_BITS) | self.block_index] + self.coords
            self.block = threefry4x64_20(self.key, counter)
            self.block.reverse()    # pop() then takes words 0, 1, 2, 3
            self.block_index = (self.block_index + 1) & ((1 << _BLOCK_BITS) - 1)
        return self.block.pop()

    def below(self, n):
        """A uniform integer in [0, n), n >= 1, by rejection (tfx_rng_below):
        words below 2^64 mod n are drawn again, so every value is equally
        likely."""
        incomplete = ((1 << 64) - n) % n
        x = self.next()
        while x < incomplete:
            x = self.next()
        return x % n

    def uniform(self):
        """A double in [0, 1) from the top 53 bits (tfx_rng_uniform)."""
        return float(self.next() >> 11) * (1.0 / 9007199254740992.0)

    @classmethod
    def for_coords(cls, seed, domain, a, b, c):
        """The stream of (seed, domain, a, b, c) (tfx_rng_for)."""
        return cls(seed, domain, a, b, c)


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
    in execution order (step, then microbatch).  tf-exec's third method,
    "stable", is refused: it follows the run's own gradients."""

    def __init__(self, stage_tensors, method="random", seed=1):
        if method == "stable":
            raise ValueError("method 'stable': tf-exec chooses by the gradients of its own "
                             "run, which a plan does not hold, so this module cannot "
                             "reproduce its choices; use random or rotate")
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
        r = Rng.for_coords(self.seed, _FREEZE_DOMAIN, step, stage, microbatch)
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

    def recompute_count(self, stage, microbatch, layers):
        """How many of a stage's `layers` checkpointed layers (activation
        checkpointing) the backward of (stage, microbatch) recomputes:
        round(q layers) of its planned recompute ratio q, halves up.  The
        ratio applies in full from the first step: it is what keeps a rank
        under its memory limit, not a share of the freezing to ramp in."""
        return freeze_count(self.plan.recompute_ratio(stage, microbatch), layers)

    def step_choices(self, step):
        """{(stage, microbatch): mask} for every stage at step."""
        return {(s, m): mask for s in range(self.plan.stages)
                for m, mask in enumerate(self.stage_choices(step, s))}
