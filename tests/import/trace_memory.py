#!/usr/bin/env python3
"""Each stage's memory fields computed from Kineto traces with [memory]
events, independently of tf-import, as docs/tf-import.md defines them.

    trace_memory.py RANK_TRACE... [--frozen FROZEN_TRACE...] > want.json

writes {"<stage>": {"static_bytes": ..., "activation_bytes": ...,
"activation_frozen_bytes": ... (with --frozen)}}.  A trace's rank is its
distributedInfo.rank and holds one stage (stage = rank), as the committed
fixtures do.  Steps after the first; medians over steps and microbatches;
the growth across a forward is the sum of Bytes of the device's [memory]
events from its start to the start of the rank's next compute action.
"""
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from trace_medians import COMPUTE, load  # noqa: E402  (the trace reader, shared)


def stage_figures(path):
    """(rank, static bytes, {stage: [growth across each F]})."""
    doc = load(path)
    events = doc["traceEvents"]
    mem = sorted((e["ts"], e["args"]["Bytes"], e["args"]["Total Allocated"])
                 for e in events if e.get("name") == "[memory]" and e.get("ph") == "i"
                 and e["args"]["Device Type"] == 0)
    steps = sorted((e["ts"], e["ts"] + e["dur"]) for e in events
                   if e.get("ph") == "X" and e.get("name", "").startswith("ProfilerStep#"))
    acts = sorted((e["ts"], int(m.group(1)), m.group(2)) for e in events
                  if e.get("ph") == "X" and (m := COMPUTE.match(e.get("name", ""))))
    static, growth = [], {}
    for start, end in steps[1:] if len(steps) > 1 else steps:
        inside = [a for a in acts if start <= a[0] < end]
        if not inside:
            continue
        before = [m for m in mem if m[0] < inside[0][0]]
        static.append(before[-1][2] if before else mem[0][2] - mem[0][1])
        for k, (ts, stage, kind) in enumerate(inside):
            if kind != "F":
                continue
            nxt = inside[k + 1][0] if k + 1 < len(inside) else end
            growth.setdefault(stage, []).append(sum(b for t, b, _ in mem if ts <= t < nxt))
    return doc["distributedInfo"]["rank"], statistics.median(static), growth


def main():
    args = sys.argv[1:]
    frozen = args[args.index("--frozen") + 1:] if "--frozen" in args else []
    traces = args[:args.index("--frozen")] if frozen else args
    out = {}
    for path in traces:
        rank, static, growth = stage_figures(path)
        for stage, g in growth.items():
            out[str(stage)] = {"static_bytes": static / len(growth),
                               "activation_bytes": statistics.median(g)}
    for path in frozen:
        _, _, growth = stage_figures(path)
        for stage, g in growth.items():
            a = out[str(stage)]["activation_bytes"]
            out[str(stage)]["activation_frozen_bytes"] = min(statistics.median(g), a)
    json.dump(out, sys.stdout, indent=1)


if __name__ == "__main__":
    main()
