#!/usr/bin/env python3
"""The tables of fidelity.sh from the runs it left in OUT_DIR.

Usage: fidelity_table.py OUT_DIR

For every run r<ranks>-<loop|auto>-<k> (its summary .out, its --log .jsonl
and its plan .plan.json) prints planned vs measured batch time unfrozen and
with the plan, planned vs measured speedup and their ratio, then where the
difference with the plan comes from:
  - action times: the plan's DAG replayed under each step's measured action
    times (the summary's line) against the planned time, and the measured
    F and B/W action times against the plan's (medians over the steps with
    the plan's full ratios): F does not depend on freezing, so its drift is
    the machine's (load), and B's drift beyond F's is the cost of partial
    freezing against the LP's straight line;
  - the clock: measured batch time against that replay (what the DAG does
    not model: start, tail, sends, wake-ups beyond the lag, waiting for a
    core).
Then the range of each figure over the repeats.  Asserts nothing.
"""
import glob
import json
import os
import re
import statistics
import sys

NUM = r"([0-9.]+)"


def summary(path):
    """The figures of a training summary (None where absent)."""
    text = open(path).read()
    def grab(pattern):
        m = re.search(pattern, text)
        return [float(g) for g in m.groups()] if m else None
    out = {}
    u = grab(r"batch time without freezing: measured " + NUM + r" ms .*planned " + NUM)
    f = grab(r"batch time with the plan's freezing: measured " + NUM + r" ms .*planned " + NUM)
    s = grab(r"speedup: measured " + NUM + r"x, planned " + NUM + "x")
    ru = grab(r"under each step's measured action times:.* unfrozen " + NUM)
    rf = grab(r"under each step's measured action times:.*with the plan " + NUM)
    out["mu"], out["pu"] = u if u else (None, None)
    out["mf"], out["pf"] = f if f else (None, None)
    out["ms"], out["ps"] = s if s else (None, None)
    out["ru"] = ru[0] if ru else None
    out["rf"] = rf[0] if rf else None
    return out


def action_drift(log_path, plan_path):
    """Median over the steps with the plan's full ratios of the mean F and
    B/W action time, over the plan's means (planned durations)."""
    plan = json.load(open(plan_path))
    f_ms = [a["ms"] for a in plan["actions"] if a["type"] == "F"]
    b_ms = [a["ms"] for a in plan["actions"] if a["type"] in ("B", "W")]
    steps = [json.loads(l) for l in open(log_path)]
    frozen = [s for s in steps if s["phase"] == "frozen"]
    if not frozen or not f_ms or not b_ms:
        return None, None
    f = statistics.median(s["forward_ms"] for s in frozen) / statistics.mean(f_ms)
    b = statistics.median(s["backward_ms"] for s in frozen) / statistics.mean(b_ms)
    return f, b


def pct(a, b):
    return "-" if a is None or b is None else "%+.1f%%" % (100.0 * (a / b - 1.0))


def rows(out_dir):
    found = []
    for path in glob.glob(os.path.join(out_dir, "r*-*-*.out")):
        m = re.match(r"r(\d+)-(loop|auto)-(\d+)\.out$", os.path.basename(path))
        if not m:
            continue
        ranks, mode, k = int(m.group(1)), m.group(2), int(m.group(3))
        base = path[:-4]
        r = summary(path)
        if r["mf"] is None:
            continue
        r["f_drift"], r["b_drift"] = action_drift(base + ".jsonl", base + ".plan.json")
        r.update(ranks=ranks, mode=mode, k=k)
        found.append(r)
    return sorted(found, key=lambda r: (r["ranks"], r["mode"] != "loop", r["k"]))


FORM = {"loop": "profile, tf-plan, --plan", "auto": "--auto-plan"}


def main():
    out_dir = sys.argv[1]
    runs = rows(out_dir)
    print("| ranks | form | run | unfrozen: planned / measured ms | with the plan: planned / "
          "measured ms | speedup: planned / measured | measured / planned speedup |")
    print("|---|---|---|---|---|---|---|")
    for r in runs:
        print("| %d | %s | %d | %.1f / %.1f (%s) | %.1f / %.1f (%s) | %.3f / %.3f | %.3f |" % (
            r["ranks"], FORM[r["mode"]], r["k"], r["pu"], r["mu"], pct(r["mu"], r["pu"]),
            r["pf"], r["mf"], pct(r["mf"], r["pf"]), r["ps"], r["ms"], r["ms"] / r["ps"]))
    print()
    print("Where the difference with the plan comes from (steps with the plan's full ratios):")
    print()
    print("| ranks | form | run | measured / planned | action times: DAG replay / planned | "
          "F / planned F | B,W / planned B,W | clock: measured / DAG replay |")
    print("|---|---|---|---|---|---|---|---|")
    for r in runs:
        print("| %d | %s | %d | %s | %s | %s | %s | %s |" % (
            r["ranks"], FORM[r["mode"]], r["k"], pct(r["mf"], r["pf"]), pct(r["rf"], r["pf"]),
            "-" if r["f_drift"] is None else "%+.1f%%" % (100 * (r["f_drift"] - 1)),
            "-" if r["b_drift"] is None else "%+.1f%%" % (100 * (r["b_drift"] - 1)),
            pct(r["mf"], r["rf"])))
    print()
    print("Ranges over the runs:")
    print()
    print("| ranks | form | runs | unfrozen: measured / planned | with the plan: measured / "
          "planned | measured / planned speedup |")
    print("|---|---|---|---|---|---|")
    keys = []
    for r in runs:
        if (r["ranks"], r["mode"]) not in keys:
            keys.append((r["ranks"], r["mode"]))
    for ranks, mode in keys:
        group = [r for r in runs if r["ranks"] == ranks and r["mode"] == mode]
        eu = [100 * (r["mu"] / r["pu"] - 1) for r in group]
        ef = [100 * (r["mf"] / r["pf"] - 1) for r in group]
        sp = [r["ms"] / r["ps"] for r in group]
        print("| %d | %s | %d | %+.1f%% to %+.1f%% | %+.1f%% to %+.1f%% | %.3f to %.3f |" % (
            ranks, FORM[mode], len(group), min(eu), max(eu), min(ef), max(ef), min(sp), max(sp)))


if __name__ == "__main__":
    main()
