"""Applying a FreezeSchedule to a torch.distributed.pipelining stage
(torch >= 2.4; imported only when used).

Freezing a tensor for a microbatch means: that microbatch's backward
computes no gradient for it.  Autograd decides which gradients a backward
computes when the forward records the graph, so the tensors are frozen
around each microbatch's forward: PipelineStage.forward_one_chunk(
fwd_chunk_id, ...) runs with requires_grad False on the chosen parameters
of that microbatch and restores them afterwards.  The graph of that
microbatch then has no gradient node for them, and its backward (B, or I
then W when the schedule splits it) skips their weight-gradient work; a
tensor frozen in every microbatch of a step gets no gradient at all, so the
optimizer leaves it alone as tf-exec does.

The parameters are shared by every microbatch in flight, but requires_grad
is read only while a forward records its graph: microbatches whose forwards
ran before or run after keep the graphs they recorded.  Autograd also saves
a tensor for the backward only when a gradient needs it (the input of a
Linear is kept for its weight's gradient alone), so a frozen microbatch
keeps less memory from its forward to its backward.  A stage runs one
action at a time (the schedules are single-threaded), so nothing else
records a graph while the flags are changed.

Recomputation: a plan's recompute_ratio q of a backward makes the forward
of that microbatch run the first round(q L) of the stage's L layers under
activation checkpointing (torch.utils.checkpoint, non-reentrant): those
layers keep only their inputs, and the backward runs them again first.  The
second run freezes the same tensors as the first, so that it records the
same graph and saves the same tensors.  PyTorch recomputes in every
autograd call that needs a layer's tensors: a split backward's I and W are
two calls, so a layer that W needs (one with a tensor it trains) runs again
in both.  (Its GraphExecGroup, which lets calls share one recomputation,
refuses calls that read the same saved tensors, as I and W do: the node of
a Linear reads its input and weight for dX and dW alike.)

Steps are counted per stage: a forward of microbatch 0 starts the next
step (PyTorch's schedules run microbatch 0 first on every stage).
"""
import contextlib


@contextlib.contextmanager
def frozen(params, mask):
    """Within: requires_grad False on each tensor of params whose mask
    entry is True (the others as they were); afterwards every flag as it was
    before, so that it nests (a checkpointed layer's second run inside a
    backward, or inside its first run's forward)."""
    before = [p.requires_grad for p in params]
    try:
        for p, was, off in zip(params, before, mask):
            if was and off:
                p.requires_grad_(False)
        yield
    finally:
        for p, was in zip(params, before):
            p.requires_grad_(was)


@contextlib.contextmanager
def checkpointed(layers, params, mask):
    """Within: each module of layers runs under non-reentrant activation
    checkpointing; its second run (in the backward) freezes the tensors of
    mask as the first did.  Afterwards the modules run as before."""
    from torch.utils.checkpoint import checkpoint

    def wrap(forward):
        def again(*args, **kwargs):
            with frozen(params, mask):
                return forward(*args, **kwargs)

        def run(*args, **kwargs):
            return checkpoint(again, *args, use_reentrant=False, **kwargs)
        return run

    # A module's own attribute `forward`, where it has one, wins over its
    # class's; the one it had (or none) is put back.
    own = [layer.__dict__.get("forward") for layer in layers]
    for layer in layers:
        layer.forward = wrap(layer.forward)
    try:
        yield
    finally:
        for layer, forward in zip(layers, own):
            if forward is None:
                del layer.forward
            else:
                layer.forward = forward


class _StageMethods:
    """Replaces methods of a stage by wrappers; detach() puts the stage's
    own back."""

    def __init__(self, stage):
        self.stage = stage
        self._original = {}

    def wrap(self, name, wrapper):
        """Makes stage.<name>(chunk_id, ...) call wrapper(original, chunk_id,
        ...), original being the method it replaces."""
        original = self._original.setdefault(name, getattr(self.stage, name))

        def run(chunk_id, *args, **kwargs):
            return wrapper(original, chunk_id, *args, **kwargs)
        setattr(self.stage, name, run)

    def detach(self):
        for name, method in self._original.items():
            setattr(self.stage, name, method)


class FreezeHandle(_StageMethods):
    """What attach returns: the stage's current step, the masks it applied,
    the layers each microbatch recomputed, and detach() to restore the
    stage's own methods."""

    def __init__(self, stage, schedule, first_step, layers):
        super().__init__(stage)
        self.schedule = schedule
        self.step = first_step - 1     # the first forward of microbatch 0 makes it first_step
        self.masks = None              # masks of the current step, one per microbatch
        self.recomputed = None         # layers checkpointed per microbatch, this step
        self.params = list(stage.submod.parameters())
        self.layers = list(layers)

    def set_step(self, step):
        """Makes the next forward of microbatch 0 start `step` (resuming)."""
        self.step = step - 1

    def _next_step(self):
        self.step += 1
        index = self.stage.stage_index
        self.masks = self.schedule.stage_choices(self.step, index)
        self.recomputed = [self.schedule.recompute_count(index, m, len(self.layers))
                           for m in range(len(self.masks))]

    def forward_one_chunk(self, original, fwd_chunk_id, *args, **kwargs):
        if fwd_chunk_id == 0 or self.masks is None:
            self._next_step()
        mask = self.masks[fwd_chunk_id]
        layers = self.layers[:self.recomputed[fwd_chunk_id]]
        with frozen(self.params, mask), checkpointed(layers, self.params, mask):
            return original(fwd_chunk_id, *args, **kwargs)


def _check_torch():
    import torch
    version = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])
    if version < (2, 4):
        raise RuntimeError(f"torch {torch.__version__}: torch.distributed.pipelining needs "
                           "torch 2.4 or newer")


def attach(stage, schedule, first_step=0, layers=None):
    """Makes `stage` (a torch.distributed.pipelining PipelineStage) freeze,
    in every microbatch, the tensors `schedule` (a FreezeSchedule) chooses
    for (step, stage.stage_index, microbatch), and recompute the first
    round(q L) of `layers` (the stage's L checkpointable modules, default
    the children of stage.submod) where the plan gives that microbatch's
    backward a recompute ratio q.  The stage's K is the number of its
    submodule's parameters; it must match the schedule's.  Returns a
    FreezeHandle.  Raises RuntimeError without torch 2.4 or newer, and
    ValueError when the counts disagree."""
    _check_torch()
    k = schedule.selector.stage_tensors[stage.stage_index]
    if layers is None:
        layers = list(stage.submod.children())
    handle = FreezeHandle(stage, schedule, first_step, layers)
    if len(handle.params) != k:
        raise ValueError(f"stage {stage.stage_index} has {len(handle.params)} parameter "
                         f"tensors, the schedule {k}")
    handle.wrap("forward_one_chunk", handle.forward_one_chunk)
    return handle


def annotate(pipe):
    """Makes a single-stage schedule (ScheduleGPipe, Schedule1F1B: their own
    loops annotate no action) wrap each action of its stage in
    torch.profiler.record_function("PP:<stage><type><microbatch>"), the
    names PyTorch's multi-stage runtime gives its actions (F, B, or I and W
    for a split backward), so that a trace of the run can be read by
    tf-import.  Each span holds the stage's compute only: the schedule waits
    for the action's input before it.  Returns an AnnotationHandle, or None
    for a schedule on the multi-stage runtime, which annotates its actions
    itself.  Its detach() restores the stage's methods.  Call it before
    attach, so that a FreezeHandle's detach() keeps the names (each restores
    what it replaced: detach in the reverse order)."""
    _check_torch()
    from torch.distributed.pipelining.schedules import PipelineScheduleSingle
    if not isinstance(pipe, PipelineScheduleSingle):
        return None
    from torch.profiler import record_function
    handle, index = _StageMethods(pipe._stage), pipe._stage.stage_index

    def named(kind_of):
        def run(original, chunk_id, *args, **kwargs):
            with record_function(f"PP:{index}{kind_of(kwargs)}{chunk_id}"):
                return original(chunk_id, *args, **kwargs)
        return run
    handle.wrap("forward_one_chunk", named(lambda kwargs: "F"))
    handle.wrap("backward_one_chunk",
                named(lambda kwargs: "B" if kwargs.get("full_backward", True) else "I"))
    handle.wrap("backward_weight_one_chunk", named(lambda kwargs: "W"))
    return handle
