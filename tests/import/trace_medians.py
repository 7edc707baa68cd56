#!/usr/bin/env python3
"""Per-action medians computed straight from torch.profiler traces, for
checking tf-import (standard library only; an independent reading of the
same rules, not a copy of the C code).

    trace_medians.py [--steps FIRST:LAST] TRACE... [--frozen TRACE...]
    trace_medians.py --order TRACE...

prints {"<stage><type><microbatch>": ms, ...} for the compute actions of all
the traces; with --order, one list per trace of its compute actions in the
order they started in its first step (an overlapped pair
PP:(0F7;7B3)OVERLAP_F_B as its two actions, forward first).  With --frozen
(a run with every parameter frozen), the F and I figures take the frozen
run's samples too, since freezing does not change them; B and W keep the
first run's alone.  For each step (ProfilerStep#N span), an action's time is its
PP: span; on the CPU side its start moves to the end of the receive
(gloo:recv, nccl:recv) posted in the matching PP:<stage>RECV_F/B<mb> span
when that ends inside the action's span.  The median over steps is the
middle value or the mean of the two middle ones.
"""
import json
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "tools", "reference"))
from drop_wait_spans import read_trace  # noqa: E402

COMPUTE = re.compile(r"PP:(\d+)([FBIW])(\d+)$")
PAIR = re.compile(r"PP:\((\d+[FBIW]\d+);(\d+[FBIW]\d+)\)OVERLAP_F_B$")
RECV = re.compile(r"PP:(\d+)RECV_([FB])(\d+)$")


# The trace at a path, plain or gzip JSON, as Python objects (the one
# reader: trace_memory.py takes it from here).
load = read_trace


def events(path):
    doc = read_trace(path)
    evs = doc if isinstance(doc, list) else doc["traceEvents"]
    return [e for e in evs if e.get("ph") == "X"]


def side(evs):
    gpu = any(e.get("cat") == "gpu_user_annotation" and e["name"].startswith("PP:") for e in evs)
    want = "gpu_user_annotation" if gpu else "user_annotation"
    return gpu, [e for e in evs if e.get("cat", "user_annotation") == want]


def steps_of(annotations):
    steps = {}
    for e in annotations:
        m = re.match(r"ProfilerStep#(\d+)$", e["name"])
        if m:
            steps[int(m.group(1))] = (e["ts"], e["ts"] + e["dur"])
    return steps


def step_times(evs, annotations, lo, hi, gpu):
    """{cell: time in ms} for the step spanning [lo, hi]."""
    inside = [e for e in annotations if lo <= e["ts"] <= hi]
    times, starts = {}, {}
    for e in inside:
        m = COMPUTE.match(e["name"])
        if m:
            cell = m.group(1) + m.group(2) + m.group(3)
            starts[cell] = (e["ts"], e["ts"] + e["dur"])
    receives = [e for e in evs if re.match(r"[a-z0-9_]+:recv", e["name"])]
    for e in inside:
        m = RECV.match(e["name"]) if not gpu else None
        if not m:
            continue
        stage, kind, mb = m.groups()
        posted = [r for r in receives if e["ts"] <= r["ts"] <= e["ts"] + e["dur"]]
        if not posted:
            continue
        arrived = max(r["ts"] + r["dur"] for r in posted)
        for t in ("F",) if kind == "F" else ("B", "I"):
            cell = stage + t + mb
            if cell in starts and starts[cell][0] < arrived:
                s, end = starts[cell]
                starts[cell] = (min(arrived, end), end)
                break
    for cell, (s, end) in starts.items():
        times[cell] = (end - s) / 1000.0
    return times


def samples(paths, first, last):
    """{cell: [time in ms of each step]} over the traces."""
    per_cell = {}
    for path in paths:
        evs = events(path)
        gpu, annotations = side(evs)
        for n, (lo, hi) in sorted(steps_of(annotations).items()):
            if first is not None and not first <= n <= last:
                continue
            for cell, t in step_times(evs, annotations, lo, hi, gpu).items():
                per_cell.setdefault(cell, []).append(t)
    return per_cell


def order(path):
    """The compute actions of the trace at path in the order they started
    in its first step (the whole trace without a step span)."""
    _, annotations = side(events(path))
    steps = steps_of(annotations)
    lo, hi = steps[min(steps)] if steps else (float("-inf"), float("inf"))
    cells = []
    for e in sorted(annotations, key=lambda e: e["ts"]):
        if not lo <= e["ts"] <= hi:
            continue
        m, pair = COMPUTE.match(e["name"]), PAIR.match(e["name"])
        if m:
            cells.append("".join(m.groups()))
        elif pair:
            cells += pair.groups()
    return cells


def main():
    args = sys.argv[1:]
    if args[:1] == ["--order"]:
        json.dump([order(path) for path in args[1:]], sys.stdout)
        print()
        return
    first, last = None, None
    if args[:1] == ["--steps"]:
        first, last = map(int, args[1].split(":"))
        args = args[2:]
    frozen = []
    if "--frozen" in args:
        frozen = args[args.index("--frozen") + 1:]
        args = args[:args.index("--frozen")]
    per_cell = samples(args, first, last)
    for cell, values in samples(frozen, first, last).items():
        if COMPUTE.match("PP:" + cell).group(2) in "FI":
            per_cell[cell] += values
    medians = {cell: statistics.median(values) for cell, values in per_cell.items()}
    json.dump(medians, sys.stdout, indent=1, sort_keys=True)
    print()


if __name__ == "__main__":
    main()
