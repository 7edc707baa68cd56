#!/usr/bin/env python3
"""Writes the traces the tf-import tests need beside the real fixtures
(standard library only):

    make_traces.py FIXTURES_DIR OUT_DIR

- kineto-rank0.json, kineto-rank1.json: a synthetic two-rank 1F1B run in
  Kineto's layout (traceEvents, distributedInfo, baseTimeNanoseconds, GPU-
  and CPU-side annotations), with known answers in kineto-expected.json:
  every action's median GPU time, and the lag between ranks (0.25 ms);
- broken variants, one per error tf-import must report;
- missing-step-rank0.json: the real rank-0 fixture less one action in one
  step.
"""
import copy
import gzip
import json
import os
import sys

LAG_MS = 0.25
BASE0_NS = 1_700_000_000_000_000_000
BASE1_NS = BASE0_NS + 5_000_192      # rank 1's clock starts 5.000192 ms later
STEPS = {5: 0.0, 6: 100.0}           # ProfilerStep number -> start, ms
SCALE = {5: 1.0, 6: 1.2}             # step 6 runs everything 20% slower
F_MS, B_MS = {0: 1.0, 1: 1.5}, {0: 2.0, 1: 2.5}


def one_f_one_b(rank, ranks=2, microbatches=4):
    order = [("F", m) for m in range(min(ranks - rank, microbatches))]
    f, b = len(order), 0
    while b < microbatches:
        order.append(("B", b))
        b += 1
        if f < microbatches:
            order.append(("F", f))
            f += 1
    return order


def simulate(scale):
    """Start and end (ms, shared clock, step-relative) of every action."""
    orders = {r: one_f_one_b(r) for r in (0, 1)}
    done, pos, free = {}, {0: 0, 1: 0}, {0: 0.0, 1: 0.0}
    while pos[0] < len(orders[0]) or pos[1] < len(orders[1]):
        for r in (0, 1):
            if pos[r] == len(orders[r]):
                continue
            kind, m = orders[r][pos[r]]
            dep = (("F", m, r - 1) if kind == "F" else ("B", m, r + 1))
            if dep[2] in (0, 1) and dep not in done:
                continue
            ready = done[dep][1] + LAG_MS if dep in done else 0.0
            start = max(free[r], ready)
            dur = (F_MS if kind == "F" else B_MS)[r] * scale
            done[(kind, m, r)] = (start, start + dur)
            free[r] = start + dur
            pos[r] += 1
    return done


def kineto_rank(rank):
    base_us_shift = (BASE1_NS - BASE0_NS) / 1000.0 if rank else 0.0
    events = [{"ph": "M", "name": "process_name", "pid": rank, "args": {"name": "python"}}]
    for n, t0 in STEPS.items():
        acts = simulate(SCALE[n])
        end = max(e for (_, _, r), (_, e) in acts.items() if r == rank)
        for cat in ("user_annotation", "gpu_user_annotation"):
            events.append({"ph": "X", "cat": cat, "name": f"ProfilerStep#{n}", "pid": rank,
                           "tid": 1, "ts": (t0 - 1.0) * 1000 - base_us_shift,
                           "dur": (end + 2.0) * 1000})
        for (kind, m, r), (s, e) in acts.items():
            if r != rank:
                continue
            ts = (t0 + s) * 1000 - base_us_shift
            # GPU side: the real times; CPU side: launches, ten times shorter.
            events.append({"ph": "X", "cat": "gpu_user_annotation", "name": f"PP:{r}{kind}{m}",
                           "pid": rank, "tid": 7, "ts": ts, "dur": (e - s) * 1000})
            events.append({"ph": "X", "cat": "user_annotation", "name": f"PP:{r}{kind}{m}",
                           "pid": rank, "tid": 1, "ts": ts - 50, "dur": (e - s) * 100})
            events.append({"ph": "X", "cat": "kernel", "name": "ampere_sgemm", "pid": rank,
                           "tid": 7, "ts": ts + 1, "dur": (e - s) * 1000 - 2})
    return {"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": rank,
                                                    "world_size": 2},
            "baseTimeNanoseconds": BASE1_NS if rank else BASE0_NS,
            "displayTimeUnit": "ms", "traceEvents": events}


def expected():
    cells = {}
    for r in (0, 1):
        for kind, m in one_f_one_b(r):
            ms = [(F_MS if kind == "F" else B_MS)[r] * SCALE[n] for n in STEPS]
            cells[f"{r}{kind}{m}"] = sum(ms) / len(ms)
    return {"actions": cells, "p2p_ms": LAG_MS}


def write(out, name, doc):
    with open(os.path.join(out, name), "w") as f:
        json.dump(doc, f)


def broken_variants(out, rank0, rank1):
    no_pp = {"traceEvents": [e for e in rank0["traceEvents"]
                             if not e.get("name", "").startswith("PP:")]}
    write(out, "no-pp.json", no_pp)
    overlap = copy.deepcopy(rank0)
    overlap["traceEvents"].append({"ph": "X", "cat": "gpu_user_annotation",
                                   "name": "PP:(0F3;1B0)OVERLAP_F_B", "pid": 0, "tid": 7,
                                   "ts": 5.0, "dur": 1.0})
    write(out, "overlap.json", overlap)
    unknown = copy.deepcopy(rank0)
    unknown["traceEvents"].append({"ph": "X", "cat": "gpu_user_annotation", "name": "PP:0X1",
                                   "pid": 0, "tid": 7, "ts": 5.0, "dur": 1.0})
    write(out, "unknown-name.json", unknown)
    bad_dur = copy.deepcopy(rank0)
    bad_dur["traceEvents"].append({"ph": "X", "cat": "gpu_user_annotation", "name": "PP:0F1",
                                   "pid": 0, "tid": 7, "ts": 5.0, "dur": "abc"})
    write(out, "bad-dur.json", bad_dur)
    world3 = copy.deepcopy(rank0)
    world3["distributedInfo"]["world_size"] = 3
    write(out, "world3-rank0.json", world3)
    world3_1 = copy.deepcopy(rank1)
    world3_1["distributedInfo"]["world_size"] = 3
    write(out, "world3-rank1.json", world3_1)
    dup = copy.deepcopy(rank1)
    dup["distributedInfo"]["rank"] = 0
    write(out, "dup-rank0.json", dup)
    write(out, "not-a-trace.json", {"format": "tf-profile", "ranks": 2})
    with open(os.path.join(out, "text.json"), "w") as f:
        f.write("rank 0: 0F0 0F1 0B0\n")
    with open(os.path.join(out, "garbage.json.gz"), "wb") as f:
        f.write(b"\x1f\x8b\x08\x00" + b"not deflate data at all" * 4)


def missing_step(fixtures, out):
    """The rank-0 fixture without PP:0B2 in ProfilerStep#2."""
    with open(os.path.join(fixtures, "pp2-1f1b-rank0.json")) as f:
        events = json.load(f)
    step = next(e for e in events if e["name"] == "ProfilerStep#2")
    lo, hi = step["ts"], step["ts"] + step["dur"]
    kept = [e for e in events if not (e["name"] == "PP:0B2" and lo <= e["ts"] <= hi)]
    assert len(kept) == len(events) - 1
    write(out, "missing-step-rank0.json", kept)


def main():
    fixtures, out = sys.argv[1], sys.argv[2]
    rank0, rank1 = kineto_rank(0), kineto_rank(1)
    write(out, "kineto-rank0.json", rank0)
    write(out, "kineto-rank1.json", rank1)
    write(out, "kineto-expected.json", expected())
    broken_variants(out, rank0, rank1)
    missing_step(fixtures, out)
    with open(os.path.join(fixtures, "pp2-1f1b-rank1.json.gz"), "rb") as f:
        data = f.read()
    with open(os.path.join(out, "truncated.json.gz"), "wb") as f:
        f.write(data[: len(data) // 2])
    with gzip.open(os.path.join(out, "kineto-rank1.json.gz"), "wt") as f:
        json.dump(rank1, f)


if __name__ == "__main__":
    main()
