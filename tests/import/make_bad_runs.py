#!/usr/bin/env python3
"""Writes traces that are each valid JSON but not one plannable run, one per
check tf-import makes (standard library only):

    make_bad_runs.py OUT_DIR

Built from make_traces.py's synthetic Kineto run (two ranks, 1F1B over 4
microbatches, clocks shared through baseTimeNanoseconds, lag 0.25 ms) and
from small hand-laid orders in the legacy profiler's layout:

- b-before-f-rank1.json: rank 1 runs 1B0 before 1F0 (a deadlock);
- f1-before-f0-rank0.json: rank 0 runs 0F1 before 0F0 (a deadlock);
- gpipe-rank1.json: rank 1 of a GPipe run, to pair with a 1F1B rank 0
  (two runs' files: a deadlock); 1f1b-rank0.json, 1f1b-rank1.json: the
  1F1B run it came from, laid out the same way; 1f1b-again-rank0.json,
  1f1b-again-rank1.json: another run of it (its actions 20 us apart), as a
  frozen run;
- hour-rank1.json, 5ms-rank1.json, 10h-rank1.json: rank 1 with its clock an
  hour, 5 ms and ten hours off (baseTimeNanoseconds moved, events not);
- inf-rank1.json, neg-inf-rank1.json: baseTimeNanoseconds 1e308 and -1e308;
- slow-rank0.json, slow-rank1.json: one consistent run whose messages take
  5 ms, a third of the step; slow-expected.json: its lag;
- overlap-rank0.json: rank 0 with PP:0F1 starting 0.5 ms before PP:0F0
  ends (two actions at once);
- copy-rank0.json: kineto-rank0.json under another name.
"""
import copy
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_traces as mt  # noqa: E402

MS = 1000.0  # microseconds


def write(out, name, doc):
    with open(os.path.join(out, name), "w") as f:
        json.dump(doc, f)


def laid_out(cells, steps=(1, 2), gap_us=10.0):
    """A legacy trace of one rank running cells in order, back to back
    (1 ms each, gap_us apart), in each profiler step."""
    events, t = [], 0.0
    for n in steps:
        start = t
        body = []
        for cell in cells:
            body.append({"name": f"PP:{cell}", "ph": "X", "ts": t, "dur": MS})
            t += MS + gap_us
        events.append({"name": f"ProfilerStep#{n}", "ph": "X", "ts": start - 1,
                       "dur": t - start + 2})
        events += body
        t += 5 * MS
    return events


def one_f_one_b_cells(rank):
    return [f"{rank}{kind}{m}" for kind, m in mt.one_f_one_b(rank)]


def shifted(doc, ns):
    out = copy.deepcopy(doc)
    out["baseTimeNanoseconds"] = doc["baseTimeNanoseconds"] + ns
    return out


def deadlocks(out):
    write(out, "1f1b-rank0.json", laid_out(one_f_one_b_cells(0)))
    write(out, "1f1b-rank1.json", laid_out(one_f_one_b_cells(1)))
    write(out, "1f1b-again-rank0.json", laid_out(one_f_one_b_cells(0), gap_us=20.0))
    write(out, "1f1b-again-rank1.json", laid_out(one_f_one_b_cells(1), gap_us=20.0))
    cells = one_f_one_b_cells(1)
    b0, f0 = cells.index("1B0"), cells.index("1F0")
    cells[b0], cells[f0] = cells[f0], cells[b0]
    write(out, "b-before-f-rank1.json", laid_out(cells))
    cells = one_f_one_b_cells(0)
    cells[0], cells[1] = cells[1], cells[0]
    write(out, "f1-before-f0-rank0.json", laid_out(cells))
    write(out, "gpipe-rank1.json", laid_out([f"1F{m}" for m in range(4)] +
                                            [f"1B{m}" for m in range(4)]))


def clocks(out, rank1):
    write(out, "hour-rank1.json", shifted(rank1, 3600 * 10**9))
    write(out, "5ms-rank1.json", shifted(rank1, 5 * 10**6))
    write(out, "10h-rank1.json", shifted(rank1, 36000 * 10**9))
    for name, value in (("inf-rank1.json", "1e308"), ("neg-inf-rank1.json", "-1e308")):
        text = json.dumps(rank1).replace(str(rank1["baseTimeNanoseconds"]), value)
        with open(os.path.join(out, name), "w") as f:
            f.write(text)


def slow_run(out):
    saved = mt.LAG_MS
    mt.LAG_MS = 5.0
    try:
        write(out, "slow-rank0.json", mt.kineto_rank(0))
        write(out, "slow-rank1.json", mt.kineto_rank(1))
    finally:
        mt.LAG_MS = saved
    write(out, "slow-expected.json", {"p2p_ms": 5.0})


def overlap(out, rank0):
    doc = copy.deepcopy(rank0)
    spans = {e["name"]: e for e in doc["traceEvents"]
             if e.get("cat") == "gpu_user_annotation" and e["name"] in ("PP:0F0", "PP:0F1")
             and e["ts"] < 50 * MS}
    spans["PP:0F1"]["ts"] = spans["PP:0F0"]["ts"] + spans["PP:0F0"]["dur"] - 0.5 * MS
    write(out, "overlap-rank0.json", doc)


def main():
    out = sys.argv[1]
    rank0, rank1 = mt.kineto_rank(0), mt.kineto_rank(1)
    deadlocks(out)
    clocks(out, rank1)
    slow_run(out)
    overlap(out, rank0)
    write(out, "copy-rank0.json", rank0)


if __name__ == "__main__":
    main()
