"""What the tests that need torch share (test_torch_env.py, test_torch_stage.py).

require_torch: where torch (2.4 or newer) cannot be imported, the test
program ends with ctest's skip status 77 and says why, or fails where
TF_REQUIRE_TORCH=1 (bash tools/bootstrap.sh test sets it, so that CI cannot
skip them).

run_ranks: a function run on several fresh processes joined in one gloo
group (a file store, so no port can collide with another run).

A pipeline and its answer computed without one: pipeline_step runs one
step of a torch.distributed.pipelining schedule of the model of `model()`
split into stages over the ranks, optionally freezing tensors with
timelyfreeze_plan; expected_grads gives each stage's gradients
from plain autograd on the whole model, microbatch by microbatch, leaving
out what each microbatch froze.
"""
import datetime
import inspect
import os
import re
import sys
import tempfile

SKIP = 77                      # SKIP_RETURN_CODE of these tests (tests/python/CMakeLists.txt)
MINIMUM = (2, 4)               # torch.distributed.pipelining
MICROBATCHES = 8
ROWS = 3                       # rows per microbatch
WIDTHS = (6, 8, 3)             # in, hidden, out
BLOCKS = 8                     # model()'s blocks: Linear and Tanh (the last: Linear)


def torch_problem():
    """None where this python imports torch MINIMUM or newer, else why not."""
    try:
        import torch
    except ImportError as e:
        return f"{sys.executable} cannot import torch ({e})"
    found = re.match(r"(\d+)\.(\d+)", torch.__version__)
    if not found or tuple(int(v) for v in found.groups()) < MINIMUM:
        return (f"{sys.executable} has torch {torch.__version__}; these tests need "
                f"{MINIMUM[0]}.{MINIMUM[1]} or newer")
    return None


def require_torch():
    """Returns where torch is usable; otherwise exits: 1 when TF_REQUIRE_TORCH=1,
    else SKIP.  Both say what is missing and how to get it."""
    problem = torch_problem()
    if problem is None:
        return
    hint = ("bash tools/bootstrap.sh pytorch makes the environment; configure with "
            "-DTF_TORCH_PYTHON=.venv-torch/bin/python")
    if os.environ.get("TF_REQUIRE_TORCH") == "1":
        print(f"FAILED: {problem}, and TF_REQUIRE_TORCH=1 requires it ({hint})", file=sys.stderr)
        sys.exit(1)
    print(f"skipped: {problem} ({hint})")
    sys.exit(SKIP)


def _rank_main(rank, world, store, out, fn, args):
    import torch
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=120))
    try:
        result = fn(rank, world, *args)
    finally:
        dist.destroy_process_group()
    torch.save(result, os.path.join(out, f"rank{rank}.pt"))


def run_ranks(fn, world, *args):
    """Runs fn(rank, world, *args) in `world` new processes that form one gloo
    group; returns their results (tensors, numbers, lists, dicts) in rank
    order.  A rank's exception is raised here (torch.multiprocessing's
    ProcessRaisedException, with the rank's traceback)."""
    import torch
    import torch.multiprocessing as mp
    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(_rank_main, args=(world, os.path.join(tmp, "store"), tmp, fn, args),
                 nprocs=world, join=True)
        return [torch.load(os.path.join(tmp, f"rank{r}.pt")) for r in range(world)]


def model():
    """The same small MLP (and weights) in every process: BLOCKS blocks,
    each a Linear and a Tanh, the last a Linear alone."""
    import torch
    torch.manual_seed(0)
    blocks = []
    for b in range(BLOCKS):
        width_in = WIDTHS[0] if b == 0 else WIDTHS[1]
        width_out = WIDTHS[2] if b == BLOCKS - 1 else WIDTHS[1]
        layers = [torch.nn.Linear(width_in, width_out)]
        if b < BLOCKS - 1:
            layers.append(torch.nn.Tanh())
        blocks.append(torch.nn.Sequential(*layers))
    return torch.nn.Sequential(*blocks)


def batch():
    import torch
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(MICROBATCHES * ROWS, WIDTHS[0], generator=generator)
    y = torch.randn(MICROBATCHES * ROWS, WIDTHS[2], generator=generator)
    return x, y


def stage_module(full, stage, stages):
    """Stage `stage` of `stages` (1, 2, 4 or 8): its share of the blocks,
    in order; its children (the blocks) are its checkpointable layers."""
    per = BLOCKS // stages
    return full[stage * per:(stage + 1) * per]


def stage_tensors(stages):
    """K of each stage: its parameter tensors."""
    full = model()
    return [len(list(stage_module(full, s, stages).parameters())) for s in range(stages)]


def graph_tensors(output, params):
    """The indices in params of the tensors whose gradients the graph of
    `output` (a tensor) accumulates: its AccumulateGrad nodes' variables."""
    index = {id(p): i for i, p in enumerate(params)}
    found, seen = set(), set()
    todo = [output.grad_fn] if output.grad_fn is not None else []
    while todo:
        node = todo.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        variable = getattr(node, "variable", None)
        if variable is not None and id(variable) in index:
            found.add(index[id(variable)])
        todo.extend(fn for fn, _ in node.next_functions)
    return sorted(found)


class StageRecorder:
    """What a stage did, seen from outside the hook: the tensors in each
    microbatch's graph (wrapping the stage's forward_one_chunk, outermost),
    and how often each of its layers ran inside forward_one_chunk and inside
    the backward calls (a forward pre-hook on the layer's Linear, which its
    block calls again when it recomputes in a backward; a recomputation
    stops as soon as it has what the backward needs, possibly inside the
    Linear, so a hook after the forward would miss it)."""

    PHASES = {"forward_one_chunk": "forward", "backward_one_chunk": "backward",
              "backward_weight_one_chunk": "backward"}

    def __init__(self, stage):
        params = list(stage.submod.parameters())
        self.params = params
        self.in_graph = {}
        layers = list(stage.submod.children())
        index = {id(p): i for i, p in enumerate(params)}
        self.layer_tensors = [[index[id(p)] for p in layer.parameters()] for layer in layers]
        self.runs = {"forward": [0] * len(layers), "backward": [0] * len(layers)}
        self.phase = None
        for name, phase in self.PHASES.items():
            self.wrap(stage, name, phase)
        for i, layer in enumerate(layers):
            layer[0].register_forward_pre_hook(lambda *_, i=i: self.count(i))

    def wrap(self, stage, name, phase):
        inner = getattr(stage, name)

        def run(chunk_id, *args, **kwargs):
            self.phase = phase
            try:
                output = inner(chunk_id, *args, **kwargs)
            finally:
                self.phase = None
            if phase == "forward":
                self.in_graph[chunk_id] = graph_tensors(output, self.params)
            return output
        setattr(stage, name, run)

    def count(self, layer):
        if self.phase is not None:      # not the stage's shape inference
            self.runs[self.phase][layer] += 1


def pipeline_step(rank, world, schedule="1F1B", stages=None, freezing=None, annotated=False):
    """One step of Schedule`schedule` (GPipe, 1F1B, Interleaved1F1B,
    InterleavedZeroBubble, ZBVZeroBubble, ...) over MICROBATCHES of
    batch(), model() split into `stages` (default: one per rank), this
    rank's stages attached to `freezing` (a FreezeSchedule) when given.
    Gradients are summed over microbatches, not averaged (scale_grads=False
    where the schedule has the choice).  Returns {"stages": {stage: its
    gradients (None where a tensor got none), the masks and recompute counts
    the hook applied, the tensors in each microbatch's graph, the runs of
    each layer in forwards and in backwards, and each layer's tensors}, and, from the rank with the last stage, "losses" per
    microbatch and "output"}.  With `annotated`, the step runs under
    torch.profiler after timelyfreeze_plan.annotate(pipe), and the result
    has "spans": the rank's PP: compute spans (PP:<stage><type><mb>, a pair
    whole), by start."""
    import torch
    from torch.distributed import pipelining
    from torch.distributed.pipelining.schedules import PipelineScheduleSingle
    from timelyfreeze_plan import annotate, attach, rank_stages

    stages = stages or world
    x, y = batch()
    full = model()
    held, handles, recorders = [], {}, {}
    for s in rank_stages(schedule, rank, world, stages // world):
        width = WIDTHS[0] if s == 0 else WIDTHS[1]
        stage = pipelining.PipelineStage(stage_module(full, s, stages), s, stages,
                                         torch.device("cpu"),
                                         input_args=(torch.empty(ROWS, width),))
        handles[s] = attach(stage, freezing) if freezing is not None else None
        recorders[s] = StageRecorder(stage)
        held.append(stage)
    kind = getattr(pipelining, "Schedule" + schedule)
    options = {}
    if "scale_grads" in inspect.signature(kind).parameters:
        options["scale_grads"] = False
    pipe = kind(held[0] if issubclass(kind, PipelineScheduleSingle) else held, MICROBATCHES,
                loss_fn=torch.nn.functional.mse_loss, **options)
    losses = []
    first, last = 0 in handles, stages - 1 in handles
    inputs = (x,) if first else ()
    kwargs = {"target": y, "losses": losses} if last else {}
    result = {"stages": {}}
    if annotated:
        annotate(pipe)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            output = pipe.step(*inputs, **kwargs)
        spans = sorted((e.time_range.start, e.name) for e in prof.events()
                       if re.match(r"PP:(\d+[FBIW]\d+|\(.*\)OVERLAP_F_B)$", e.name))
        result["spans"] = [name for _, name in spans]
    else:
        output = pipe.step(*inputs, **kwargs)
    for s in held:
        handle, recorder = handles[s.stage_index], recorders[s.stage_index]
        result["stages"][s.stage_index] = {
            "grads": [None if p.grad is None else p.grad.detach().clone()
                      for p in s.submod.parameters()],
            "masks": handle.masks if handle else None,
            "recomputed": handle.recomputed if handle else None,
            "in_graph": recorder.in_graph, "runs": recorder.runs,
            "layer_tensors": recorder.layer_tensors}
    if last:
        result["losses"] = [float(v.detach()) for v in losses]
        result["output"] = output.detach().clone()
    return result


def pipeline_steps(rank, world, runs):
    """pipeline_step for each (schedule, stages, freezing) of runs, one
    after another in the same processes (starting processes that import
    torch is the slow part); returns their results in order."""
    return [pipeline_step(rank, world, *run) for run in runs]


def merged(results):
    """run_ranks' results of pipeline_step as one: every stage, and the last
    stage's losses and output."""
    out = {"stages": {}}
    for r in results:
        out["stages"].update(r["stages"])
        out.update({k: v for k, v in r.items() if k != "stages"})
    return out


def reference(stages):
    """Per microbatch, plain autograd on the whole model: (losses,
    gradients of each stage's tensors per microbatch, the whole output)."""
    import torch
    x, y = batch()
    full = model()
    params = [list(stage_module(full, s, stages).parameters()) for s in range(stages)]
    losses, grads = [], []
    for m in range(MICROBATCHES):
        rows = slice(m * ROWS, (m + 1) * ROWS)
        loss = torch.nn.functional.mse_loss(full(x[rows]), y[rows])
        losses.append(float(loss.detach()))
        grads.append([torch.autograd.grad(loss, p, retain_graph=True) for p in params])
    with torch.no_grad():
        output = full(x)
    return losses, grads, output


def expected_grads(stage, stages, masks=None):
    """The gradients of stage `stage` of `stages` when microbatch m froze the
    tensors masks[m] marks (None: nothing frozen): the sum over the
    microbatches that kept each tensor, None for a tensor every microbatch
    froze."""
    import torch
    _, grads, _ = reference(stages)
    out = []
    for i in range(len(grads[0][stage])):
        kept = [grads[m][stage][i] for m in range(MICROBATCHES)
                if masks is None or not masks[m][i]]
        out.append(torch.stack(kept).sum(0) if kept else None)
    return out
