"""Checks the memory counters of tf-dot's Chrome trace against the plan.

usage: check_memory_trace.py PLAN.json TRACE.json

Walks every rank's actions in the plan's order and counts its live bytes
from the plan's own figures, by the rules of docs/formats.md ("Memory"),
written here afresh rather than taken from the renderer: a forward keeps
A(f) - q D from its end, an R brings q D back at its end, a recomputing
backward with no R brings it back at its start, a B frees A(f) at its end,
an I keeps G (1 - f) of it, a W frees that.  The trace's "live bytes"
counter of the rank's process must equal that count at every time either
changes, and its "memory limit" counter the plan's limit.  Exits 1 naming
the first rank, time and values that differ.
"""
import json
import sys


def stage_rules(plan):
    """Per stage: A, A(f=1), G, X, D and whether freezing saves memory."""
    memory = plan["memory"]
    caps = plan["max_freeze_ratio"]
    out = []
    for s, st in enumerate(memory["stages"]):
        cap = caps[s] if isinstance(caps, list) else caps
        saves = memory.get("freeze_saves_memory", True) and cap > 0
        a = st.get("activation_bytes", 0.0)
        a_frozen = st.get("activation_frozen_bytes", a) if saves else a
        recomputes = "checkpoint_bytes" in st
        dropped = max(a_frozen - st["checkpoint_bytes"], 0.0) if recomputes else 0.0
        out.append({"a": a, "af": a_frozen, "g": st.get("weight_grad_bytes", a),
                    "x": st.get("backward_input_transient_bytes", 0.0),
                    "d": dropped, "saves": saves, "recomputes": recomputes,
                    "static": st.get("static_bytes", 0.0)})
    return out


def changes(plan, rank, rules):
    """The rank's (time in ms, change in bytes), in its order."""
    acts = [a for a in plan["actions"] if a["rank"] == rank]
    everyone = {(a["type"], a["stage"], a["microbatch"]): a for a in plan["actions"]}

    def find(kinds, s, m):
        for k in kinds:
            if (k, s, m) in everyone:
                return everyone[(k, s, m)]
        return None

    out = []
    for a in acts:
        s, m, t = a["stage"], a["microbatch"], a["type"]
        st = rules[s]
        freezer = find("BW", s, m)
        recomputer = find("BI", s, m)
        f = freezer.get("freeze_ratio", 0.0) if freezer else 0.0
        q = recomputer.get("recompute_ratio", 0.0) if recomputer else 0.0
        kept = st["a"] - f * (st["a"] - st["af"])
        end = a["start_ms"] + a["ms"]
        if t in "BI" and st["recomputes"] and find("R", s, m) is None:
            out.append((a["start_ms"], q * st["d"]))
        if t == "F":
            out.append((end, kept - q * st["d"]))
        elif t == "R":
            out.append((end, q * st["d"]))
        elif t == "B":
            out.append((end, -kept))
        elif t == "I":
            held = 1 - (f if st["saves"] else 0.0)
            out.append((a["start_ms"], st["x"] * held))  # on top while the I runs
            out.append((end, -st["x"] * held - kept + st["g"] * held))
        elif t == "W":
            out.append((end, -st["g"] * (1 - (f if st["saves"] else 0.0))))
    return out


def value_at(steps, when):
    """A step function [(t, value)] just after time when."""
    value = None
    for t, v in steps:
        if t <= when + 1e-6:
            value = v
    return value


def main():
    plan = json.load(open(sys.argv[1]))
    trace = json.load(open(sys.argv[2]))["traceEvents"]
    rules = stage_rules(plan)
    ranks = plan["ranks"]
    limit = plan["memory"].get("limit_bytes")
    for r in range(ranks):
        static = sum(st["static"] for s, st in enumerate(rules)
                     if any(a["stage"] == s and a["rank"] == r for a in plan["actions"]))
        live, expected = static, [(0.0, static)]
        for t, d in changes(plan, r, rules):
            live += d
            expected.append((t, live))
        drawn = [(e["ts"] / 1000.0, e["args"]["bytes"]) for e in trace
                 if e["ph"] == "C" and e["pid"] == r and e["name"] == "live bytes"]
        if len(drawn) < 2:
            sys.exit(f"rank {r}: {len(drawn)} live-bytes samples")
        for when in sorted({t for t, _ in expected} | {t for t, _ in drawn}):
            want, got = value_at(expected, when), value_at(drawn, when)
            if got is None or abs(got - want) > 1e-6 * max(abs(want), 1.0):
                sys.exit(f"rank {r} at {when:.6f} ms: trace says {got}, plan gives {want}")
        limits = [e["args"]["bytes"] for e in trace
                  if e["ph"] == "C" and e["pid"] == r and e["name"] == "memory limit"]
        want_limit = limit[r] if isinstance(limit, list) else limit
        if limit is not None and (not limits or any(abs(v - want_limit) > 1 for v in limits)):
            sys.exit(f"rank {r}: memory limit counters {limits}, plan says {want_limit}")
    print(f"{ranks} ranks: live bytes and limit counters match the plan")


main()
