#!/usr/bin/env python3
"""Writes the traces the tf-import tests need beside the real fixtures
(standard library only):

    make_traces.py FIXTURES_DIR OUT_DIR

- kineto-rank0.json, kineto-rank1.json: a synthetic two-rank 1F1B run in
  Kineto's layout (traceEvents, distributedInfo, baseTimeNanoseconds, GPU-
  and CPU-side annotations), with known answers in kineto-expected.json:
  every action's median GPU time, and the lag between ranks (0.25 ms);
- dualpipev-rank0.json, dualpipev-rank1.json: a synthetic DualPipeV run (2
  ranks x 2 stages, 4 microbatches) whose overlapped pairs are one
  `PP:(0F3;3B1)OVERLAP_F_B` span each, with known answers in
  dualpipev-expected.json: every lone action's and every pair's median;
- kineto-mem-rank0.json, kineto-mem-rank1.json: the Kineto run with
  profile_memory's [memory] events on the GPU (device 0: MEM_STATIC[rank]
  allocated before the first step, each forward allocating MEM_ACT[stage]
  that its backward frees) and on the CPU (small allocations to be ignored);
  kineto-split-mem-rank0.json, ...-rank1.json: the same with each backward
  split into I and W, an I allocating MEM_WG_NEW and freeing MEM_I_FREES, so
  that weight_grad_bytes = MEM_ACT + MEM_WG_NEW - MEM_I_FREES;
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
MEM_STATIC = {0: 3_000_000_000, 1: 2_000_000_000}   # bytes per rank
MEM_ACT = {0: 50_000_000, 1: 70_000_000}            # bytes a forward keeps, per stage
MEM_WG_NEW = {0: 8_000_000, 1: 9_000_000}           # an I's weight-gradient buffers
MEM_I_FREES = {0: 20_000_000, 1: 30_000_000}        # what an I frees of its forward's bytes


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


def memory_event(ts, nbytes, total, device_type):
    return {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 0,
            "tid": 1, "ts": ts, "args": {"Total Reserved": 0, "Total Allocated": total,
                                         "Bytes": nbytes, "Device Id": 0 if device_type else -1,
                                         "Device Type": device_type, "Addr": 1}}


def split_backwards(doc):
    """Each PP:sBm span of doc becomes PP:sIm over its first half and PP:sWm
    over its second."""
    out = []
    for e in doc["traceEvents"]:
        name = e.get("name", "")
        if e.get("ph") != "X" or not name.startswith("PP:") or "B" not in name:
            out.append(e)
            continue
        half = e["dur"] / 2
        out.append(dict(e, name=name.replace("B", "I"), dur=half))
        out.append(dict(e, name=name.replace("B", "W"), ts=e["ts"] + half, dur=half))
    doc["traceEvents"] = out
    return doc


def memory_changes(rank, gpu):
    """(ts, bytes, device type) of the GPU's allocations and frees over the
    annotations gpu (ts, dur, name), and small CPU ones beside them."""
    changes = []
    for ts, dur, name in gpu:
        kind = name[len(f"PP:{rank}")]
        if kind == "F":
            changes += [(ts + 1, MEM_ACT[rank], 1), (ts + 2, 4096, 0)]
        elif kind == "B":
            changes += [(ts + dur - 1, -MEM_ACT[rank], 1), (ts + dur - 2, -4096, 0)]
        elif kind == "I":   # gradient buffers for W, and part of the forward's bytes freed
            changes += [(ts + 1, MEM_WG_NEW[rank], 1), (ts + dur - 1, -MEM_I_FREES[rank], 1),
                        (ts + dur - 2, -4096, 0)]
        elif kind == "W":
            changes += [(ts + dur - 1, MEM_I_FREES[rank] - MEM_ACT[rank] - MEM_WG_NEW[rank], 1)]
    return changes


def kineto_memory_rank(rank, split=False):
    """kineto_rank(rank) with [memory] events (see the module's docstring);
    split: its backwards split into I and W (split_backwards)."""
    doc = kineto_rank(rank)
    if split:
        doc = split_backwards(doc)
    gpu = sorted((e["ts"], e["dur"], e["name"]) for e in doc["traceEvents"]
                 if e.get("cat") == "gpu_user_annotation" and e["name"].startswith("PP:"))
    first = min(e["ts"] for e in doc["traceEvents"] if e.get("ph") == "X")
    total = {0: 0, 1: 0}
    for ts, nbytes, device in sorted([(first - 500, MEM_STATIC[rank], 1)] +
                                     memory_changes(rank, gpu)):
        total[device] += nbytes
        doc["traceEvents"].append(memory_event(ts, nbytes, total[device], device))
    return doc


def expected():
    cells = {}
    for r in (0, 1):
        for kind, m in one_f_one_b(r):
            ms = [(F_MS if kind == "F" else B_MS)[r] * SCALE[n] for n in STEPS]
            cells[f"{r}{kind}{m}"] = sum(ms) / len(ms)
    return {"actions": cells, "p2p_ms": LAG_MS}


# PyTorch's DualPipeV order for 2 ranks, 4 microbatches
# (tests/planner/golden/schedules/DualPipeV_p2_v2_m4.csv).
DPV_ORDERS = {
    0: "0F0 0F1 0F2 3F0 3I0 3W0 3F1 (0F3;3B1)OVERLAP_F_B (3F2;0B0)OVERLAP_F_B 3B2 "
       "(3F3;0B1)OVERLAP_F_B 3B3 0I2 0W2 0I3 0W3",
    1: "1F0 2F0 1F1 2F1 1F2 2B0 (2F2;1B0)OVERLAP_F_B (1F3;2B1)OVERLAP_F_B "
       "(2F3;1B1)OVERLAP_F_B 2B2 1B2 2I3 1I3 2W3 1W3",
}
DPV_STAGE_RANK = {0: 0, 1: 1, 2: 1, 3: 0}
DPV_MS = {"F": 1.0, "B": 2.0, "I": 1.2, "W": 0.8}
DPV_HIDDEN = 0.5   # what a pair's overlap hides of the sum of its parts, ms


def dpv_units(rank):
    """The rank's order as units: each a list of (stage, type, microbatch)."""
    units = []
    for cell in DPV_ORDERS[rank].split():
        parts = cell[1:cell.index(")")].split(";") if cell.startswith("(") else [cell]
        units.append([(int(p[:-2]), p[-2], int(p[-1])) for p in parts])
    return units


def dpv_ms(stage, kind, scale):
    return DPV_MS[kind] * (1 + 0.1 * stage) * scale


def dpv_inputs(stage, kind, m, present):
    """What an action waits for from another action (rules 3 to 5 of
    planner/include/tf/dag.h); a backward waits for the backward of the
    next stage, B or I, whichever the order has."""
    if kind == "F":
        return [(stage - 1, "F", m)] if stage > 0 else []
    if kind == "W":
        return [(stage, "I", m)]
    deps = [(stage, "F", m)]
    if stage < 3:
        deps += [a for a in ((stage + 1, "B", m), (stage + 1, "I", m)) if a in present]
    return deps


def dpv_simulate(scale):
    """Start and end (ms) of every unit on the shared clock: a unit starts
    when its rank is free and the inputs of all its actions are in (plus
    the lag between ranks); a pair lasts the sum of its parts less what
    the overlap hides, and its outputs leave at its end."""
    units = {r: dpv_units(r) for r in (0, 1)}
    present = {a for r in units for unit in units[r] for a in unit}
    done, spans, pos, free = {}, {}, {0: 0, 1: 0}, {0: 0.0, 1: 0.0}
    while any(pos[r] < len(units[r]) for r in (0, 1)):
        moved = False
        for r in (0, 1):
            if pos[r] == len(units[r]):
                continue
            unit = units[r][pos[r]]
            deps = {d for a in unit for d in dpv_inputs(*a, present) if d not in unit}
            if any(d not in done for d in deps):
                continue
            ready = max([done[d][1] + (LAG_MS if DPV_STAGE_RANK[d[0]] != r else 0.0)
                         for d in deps] + [free[r]])
            dur = sum(dpv_ms(a[0], a[1], scale) for a in unit)
            if len(unit) == 2:
                dur -= DPV_HIDDEN * scale
            for a in unit:
                done[a] = (ready, ready + dur)
            spans[tuple(unit)] = (ready, ready + dur)
            free[r] = ready + dur
            pos[r] += 1
            moved = True
        assert moved, "the DualPipeV order deadlocked in the simulation"
    return spans


def dpv_name(unit):
    cells = [f"{s}{k}{m}" for s, k, m in unit]
    return f"({cells[0]};{cells[1]})OVERLAP_F_B" if len(unit) == 2 else cells[0]


def dualpipev_rank(rank):
    base_us_shift = (BASE1_NS - BASE0_NS) / 1000.0 if rank else 0.0
    events = [{"ph": "M", "name": "process_name", "pid": rank, "args": {"name": "python"}}]
    for n, t0 in STEPS.items():
        spans = dpv_simulate(SCALE[n])
        mine = {u: sp for u, sp in spans.items() if DPV_STAGE_RANK[u[0][0]] == rank}
        end = max(e for _, e in mine.values())
        events.append({"ph": "X", "cat": "gpu_user_annotation", "name": f"ProfilerStep#{n}",
                       "pid": rank, "tid": 1, "ts": (t0 - 1.0) * 1000 - base_us_shift,
                       "dur": (end + 2.0) * 1000})
        for unit, (s, e) in mine.items():
            events.append({"ph": "X", "cat": "gpu_user_annotation", "name": "PP:" + dpv_name(unit),
                           "pid": rank, "tid": 7, "ts": (t0 + s) * 1000 - base_us_shift,
                           "dur": (e - s) * 1000})
    events.sort(key=lambda e: e.get("ts", -1e18))
    return {"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": rank,
                                                    "world_size": 2},
            "baseTimeNanoseconds": BASE1_NS if rank else BASE0_NS,
            "displayTimeUnit": "ms", "traceEvents": events}


def dualpipev_expected():
    """Each lone action's and each pair's median over the two steps (the mean
    of two), from the durations the simulation gives them."""
    actions, pairs = {}, {}
    for r in (0, 1):
        for unit in dpv_units(r):
            times = []
            for n in STEPS:
                t = sum(dpv_ms(a[0], a[1], SCALE[n]) for a in unit)
                times.append(t - (DPV_HIDDEN * SCALE[n] if len(unit) == 2 else 0.0))
            (pairs if len(unit) == 2 else actions)[dpv_name(unit)] = sum(times) / len(times)
    return {"actions": actions, "pairs": pairs}


def write(out, name, doc):
    with open(os.path.join(out, name), "w") as f:
        json.dump(doc, f)


def broken_variants(out, rank0, rank1):
    no_pp = {"traceEvents": [e for e in rank0["traceEvents"]
                             if not e.get("name", "").startswith("PP:")]}
    write(out, "no-pp.json", no_pp)
    overlap = copy.deepcopy(rank0)
    overlap["traceEvents"].append({"ph": "X", "cat": "gpu_user_annotation",
                                   "name": "PP:(0F3;0W1)OVERLAP_F_B", "pid": 0, "tid": 7,
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
    for r in (0, 1):
        write(out, f"kineto-mem-rank{r}.json", kineto_memory_rank(r))
        write(out, f"kineto-split-mem-rank{r}.json", kineto_memory_rank(r, split=True))
    write(out, "dualpipev-rank0.json", dualpipev_rank(0))
    write(out, "dualpipev-rank1.json", dualpipev_rank(1))
    write(out, "dualpipev-expected.json", dualpipev_expected())
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
