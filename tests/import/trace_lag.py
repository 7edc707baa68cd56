#!/usr/bin/env python3
"""The lag between ranks of a run whose traces share no clock, computed
straight from the traces for checking tf-import (standard library only; an
independent reading of the rules in docs/tf-import.md, not a copy of the C
code):

    trace_lag.py TRACE...      (rank r's trace r-th; stage r on rank r)

For every step and microbatch, stage s+1's F takes stage s's F and stage
s's B takes stage s+1's B.  A receiver "took its input" at its compute start
(the end of the receive posted in its RECV span) when that receive is in
the trace, else no earlier than its end.  Rank r+1's clock is placed
against rank r's at the middle of what those constraints allow, so the
quickest message is as quick each way; the lag is the median, over the
messages whose receiver was idle from before the sender ended until it
started, of the sender's end to the receiver's compute start.  Prints the
lag in ms.
"""
import re
import statistics
import sys

import trace_medians as tm


def actions(path):
    """{step: {cell: (start, end, compute_start, timed)}} on the trace's clock."""
    evs = tm.events(path)
    gpu, annotations = tm.side(evs)
    receives = [e for e in evs if re.match(r"[a-z0-9_]+:recv", e["name"])]
    out = {}
    for n, (lo, hi) in tm.steps_of(annotations).items():
        inside = [e for e in annotations if lo <= e["ts"] <= hi]
        acts = {}
        for e in inside:
            m = tm.COMPUTE.match(e["name"])
            if m:
                acts["".join(m.groups())] = [e["ts"], e["ts"] + e["dur"], e["ts"], gpu]
        for e in inside:
            m = tm.RECV.match(e["name"])
            if gpu or not m:
                continue
            posted = [r for r in receives if e["ts"] <= r["ts"] <= e["ts"] + e["dur"]]
            cell = m.group(1) + m.group(2) + m.group(3)
            if posted and cell in acts:
                arrived = max(r["ts"] + r["dur"] for r in posted)
                act = acts[cell]
                act[3] = True
                act[2] = min(max(act[2], arrived), act[1])
        out[n] = acts
    return out


def messages(runs):
    """(step, from rank, to rank, sent act, got act, idle since) for each."""
    for n in runs[0]:
        for s in range(len(runs) - 1):
            for cell, act in runs[s + 1][n].items():
                if cell[len(str(s + 1))] == "F":
                    sent = runs[s][n][f"{s}F{cell[len(str(s + 1)) + 1:]}"]
                    yield n, s, s + 1, sent, act, idle(runs[s + 1][n], act)
            for cell, act in runs[s][n].items():
                if cell[len(str(s))] == "B":
                    sent = runs[s + 1][n][f"{s + 1}B{cell[len(str(s)) + 1:]}"]
                    yield n, s + 1, s, sent, act, idle(runs[s][n], act)


def idle(acts, act):
    before = [a[1] for a in acts.values() if a[0] < act[0]]
    return max(before) if before else float("-inf")


def main():
    runs = [actions(p) for p in sys.argv[1:]]
    offset = [0.0]
    for r in range(1, len(runs)):
        forward = [sent[1] - (got[2] if got[3] else got[1])
                   for _, a, b, sent, got, _ in messages(runs) if (a, b) == (r - 1, r)]
        backward = [(got[2] if got[3] else got[1]) - sent[1]
                    for _, a, b, sent, got, _ in messages(runs) if (a, b) == (r, r - 1)]
        offset.append(offset[r - 1] + (max(forward) + min(backward)) / 2)
    gaps = []
    for _, a, b, sent, got, since in messages(runs):
        sent_end, start = sent[1] + offset[a], got[2] + offset[b]
        if got[3] and since + offset[b] <= sent_end <= start:
            gaps.append(start - sent_end)
    print(statistics.median(gaps) / 1000.0 if gaps else 0.0)


if __name__ == "__main__":
    main()
