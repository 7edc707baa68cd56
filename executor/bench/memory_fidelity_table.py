"""Predicted against measured peak bytes per rank, from the files
memory_fidelity.sh leaves in OUT_DIR (the plans and the runs' logs)."""
import json
import re
import sys

SCHEDULES = ("1F1B", "GPipe", "Interleaved1F1B", "ZBVZeroBubble")
MODES = (("unfrozen", "plan.json", "unfrozen"), ("plan", "plan.json", "planned"),
         ("limit", "limit.plan.json", "planned"))


def measured_peaks(log_path):
    """Per rank, static bytes plus the largest peak_bytes of any step."""
    peaks = None
    with open(log_path) as f:
        for line in f:
            d = json.loads(line)
            step = [s + p for s, p in zip(d["static_bytes"], d["peak_bytes"])]
            peaks = step if peaks is None else [max(a, b) for a, b in zip(peaks, step)]
    return peaks


def batch_times(out_path):
    """(measured, planned) batch ms with the plan's freezing, from a summary."""
    text = open(out_path).read()
    m = re.search(r"with the plan's freezing: measured ([0-9.]+) ms.*planned ([0-9.]+) ms", text)
    return (float(m.group(1)), float(m.group(2))) if m else (None, None)


def main(out):
    print(f"{'schedule':16} {'mode':9} {'rank':>4} {'predicted MiB':>14} {'measured MiB':>13}"
          f" {'measured/predicted':>19}")
    worst = 0.0
    for sched in SCHEDULES:
        for mode, plan_file, field in MODES:
            plan = json.load(open(f"{out}/{sched}.{plan_file}"))
            log = f"{out}/{sched}.{mode}.jsonl"
            got = measured_peaks(log)
            for r, rank in enumerate(plan["per_rank"]):
                want = rank["peak_bytes"][field]
                ratio = got[r] / want
                worst = max(worst, abs(ratio - 1))
                print(f"{sched:16} {mode:9} {r:>4} {want / 2**20:>14.3f} {got[r] / 2**20:>13.3f}"
                      f" {ratio:>19.4f}")
        limit = json.load(open(f"{out}/{sched}.limit.plan.json"))["per_rank"][0].get("limit_bytes")
        measured, planned = batch_times(f"{out}/{sched}.limit.out")
        if measured:
            print(f"{sched:16} limit {limit / 2**20:.3f} MiB: batch time measured {measured:.2f} ms,"
                  f" planned {planned:.2f} ms ({100 * (measured / planned - 1):+.1f}%)")
    print(f"largest difference: {100 * worst:.2f}%")


if __name__ == "__main__":
    main(sys.argv[1])
