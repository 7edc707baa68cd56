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

Steps are counted per stage: a forward of microbatch 0 starts the next
step (PyTorch's schedules run microbatch 0 first on every stage).
"""


class FreezeHandle:
    """What attach returns: the stage's current step, the masks it applied,
    and detach() to restore the stage's own forward_one_chunk."""

    def __init__(self, stage, schedule, first_step):
        self.stage = stage
        self.schedule = schedule
        self.step = first_step - 1     # the first forward of microbatch 0 makes it first_step
        self.masks = None              # masks of the current step, one per microbatch
        self.params = list(stage.submod.parameters())
        self.trainable = [p.requires_grad for p in self.params]
        self._original = stage.forward_one_chunk

    def set_step(self, step):
        """Makes the next forward of microbatch 0 start `step` (resuming)."""
        self.step = step - 1

    def detach(self):
        self.stage.forward_one_chunk = self._original

    def forward_one_chunk(self, fwd_chunk_id, *args, **kwargs):
        if fwd_chunk_id == 0 or self.masks is None:
            self.step += 1
            self.masks = self.schedule.stage_choices(self.step, self.stage.stage_index)
        mask = self.masks[fwd_chunk_id]
        try:
            for p, trainable, frozen in zip(self.params, self.trainable, mask):
                if trainable:
                    p.requires_grad_(not frozen)
            return self._original(fwd_chunk_id, *args, **kwargs)
        finally:
            for p, trainable in zip(self.params, self.trainable):
                if trainable:
                    p.requires_grad_(True)


def attach(stage, schedule, first_step=0):
    """Makes `stage` (a torch.distributed.pipelining PipelineStage) freeze,
    in every microbatch, the tensors `schedule` (a FreezeSchedule) chooses
    for (step, stage.stage_index, microbatch).  The stage's K is the number
    of its submodule's parameters; it must match the schedule's.  Returns a
    FreezeHandle.  Raises RuntimeError without torch 2.4 or newer, and
    ValueError when the counts disagree."""
    import torch

    version = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])
    if version < (2, 4):
        raise RuntimeError(f"torch {torch.__version__}: torch.distributed.pipelining needs "
                           "torch 2.4 or newer")
    k = schedule.selector.stage_tensors[stage.stage_index]
    handle = FreezeHandle(stage, schedule, first_step)
    if len(handle.params) != k:
        raise ValueError(f"stage {stage.stage_index} has {len(handle.params)} parameter "
                         f"tensors, the schedule {k}")
    stage.forward_one_chunk = handle.forward_one_chunk
    return handle
