"""From the runs' logs to the study's figures.

A run is (schedule, arm, seed) with its JSON-lines log (tf-exec --log) and
its predicted batch times.  Per arm and schedule, over the seeds: the final
validation loss; its gap to no-freeze, seed by seed (the same seed draws the
same windows in every arm, so the paired gap is the sharper figure);
tokens/s at the full ratios; and the way to two target losses, the
no-freeze arm's mean validation loss at 50% and 80% of its steps: the steps
an arm took to reach a target (its first evaluation at or below it), the
predicted batch time of those steps, the measured batch time of those steps
(the same quantity, measured) and the measured training time (batch,
optimizer and tensor choice: what a user waits for).
"""
import csv
import json
import math
import statistics

TARGETS = (50, 80)  # percent of the no-freeze arm's steps


def read_log(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def evaluations(records, predicted):
    """Every evaluation as a dict: step, training s, measured and predicted
    batch s up to it, validation loss."""
    out, batch_ms = [], 0.0
    for r in records:
        batch_ms += r["batch_ms"]
        if "val_loss" in r:
            out.append(dict(step=r["step"], train_s=r["train_ms"] / 1e3, batch_s=batch_ms / 1e3,
                            predicted_s=predicted[r["step"] - 1] / 1e3, val_loss=r["val_loss"]))
    return out


def spread(values):
    """mean, min, max, sample standard deviation (0 for one value); NaN for
    none."""
    if not values:
        return dict(mean=math.nan, min=math.nan, max=math.nan, sd=math.nan)
    return dict(mean=statistics.mean(values), min=min(values), max=max(values),
                sd=statistics.stdev(values) if len(values) > 1 else 0.0)


def full_ratio_tokens_per_s(records):
    """Median tokens/s of the steps at the arm's full freezing (every step
    but the first, on cold caches, for an arm that never freezes)."""
    frozen = [r["tokens_per_s"] for r in records if r["phase"] == "frozen"]
    return statistics.median(frozen or [r["tokens_per_s"] for r in records[1:]])


def full_ratio_batch_ms(records):
    frozen = [r["batch_ms"] for r in records if r["phase"] == "frozen"]
    return statistics.median(frozen or [r["batch_ms"] for r in records[1:]])


def targets_of(evals_by_seed, steps):
    """{percent: the mean validation loss of the no-freeze runs at the
    evaluation nearest that share of the steps}."""
    return {p: statistics.mean(min(e, key=lambda x: abs(x["step"] - p / 100 * steps))["val_loss"]
                               for e in evals_by_seed)
            for p in TARGETS}


def first_reaching(evals, target):
    return next((e for e in evals if e["val_loss"] <= target), None)


def _target_columns(row, p, evals_by_seed, target):
    hits = [first_reaching(e, target) for e in evals_by_seed]
    hits = [h for h in hits if h]
    row["target_%d" % p] = target
    row["reached_%d" % p] = len(hits)
    for key, field in (("steps", "step"), ("predicted_s", "predicted_s"),
                       ("batch_s", "batch_s"), ("train_s", "train_s")):
        s = spread([h[field] for h in hits])
        row["%s_to_%d" % (key, p)] = s["mean"]
        if key == "train_s":
            row["train_s_to_%d_min" % p], row["train_s_to_%d_max" % p] = s["min"], s["max"]


def summarise(runs, schedule, arms, seeds, steps, predicted_full_ms):
    """The rows of one schedule, one per arm; runs maps (schedule, arm,
    seed) to {"records", "evals"}; predicted_full_ms maps an arm to its
    predicted batch time at the full ratios."""
    base = [runs[(schedule, "no-freeze", s)]["evals"] for s in seeds]
    targets = targets_of(base, steps)
    finals_base = {s: runs[(schedule, "no-freeze", s)]["evals"][-1]["val_loss"] for s in seeds}
    rows = []
    for arm in arms:
        rr = [runs[(schedule, arm, s)] for s in seeds]
        finals = [r["evals"][-1]["val_loss"] for r in rr]
        gaps = [f - finals_base[s] for f, s in zip(finals, seeds)]
        tps = [full_ratio_tokens_per_s(r["records"]) for r in rr]
        row = dict(schedule=schedule, arm=arm, seeds=len(seeds),
                   freeze_ratio=statistics.mean(r["records"][-1]["freeze_ratio"] for r in rr),
                   predicted_batch_ms=predicted_full_ms[arm],
                   measured_batch_ms=statistics.mean(full_ratio_batch_ms(r["records"])
                                                     for r in rr))
        for name, values in (("final_val_loss", finals), ("gap", gaps), ("tokens_per_s", tps)):
            for stat, v in spread(values).items():
                row["%s_%s" % (name, stat)] = v
        for p in TARGETS:
            _target_columns(row, p, [r["evals"] for r in rr], targets[p])
        rows.append(row)
    for row in rows:
        row["speedup"] = row["tokens_per_s_mean"] / rows[0]["tokens_per_s_mean"]
    return targets, rows


BASE_COLUMNS = [
    "schedule", "arm", "seeds", "freeze_ratio",
    "final_val_loss_mean", "final_val_loss_min", "final_val_loss_max", "final_val_loss_sd",
    "gap_mean", "gap_min", "gap_max", "gap_sd",
    "tokens_per_s_mean", "tokens_per_s_min", "tokens_per_s_max", "speedup",
    "predicted_batch_ms", "measured_batch_ms"]


def summary_columns():
    cols = list(BASE_COLUMNS)
    for p in TARGETS:
        cols += ["target_%d" % p, "reached_%d" % p, "steps_to_%d" % p, "predicted_s_to_%d" % p,
                 "batch_s_to_%d" % p, "train_s_to_%d" % p, "train_s_to_%d_min" % p,
                 "train_s_to_%d_max" % p]
    return cols


def _cell(v):
    return v if isinstance(v, (str, int)) else "%.6g" % v


def write_summary(rows, path):
    cols = summary_columns()
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for r in rows:
            w.writerow([_cell(r[c]) for c in cols])


def write_evaluations(runs, order, path):
    """One line per evaluation of every run, runs in `order` (a list of
    their keys)."""
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["schedule", "arm", "seed", "step", "train_s", "batch_s", "predicted_s",
                    "val_loss"])
        for key in order:
            for e in runs[key]["evals"]:
                w.writerow(list(key) + [e["step"], "%.3f" % e["train_s"], "%.3f" % e["batch_s"],
                                        "%.3f" % e["predicted_s"], "%.5f" % e["val_loss"]])


def speed_of(records):
    """A run's median batch and step time (selection included) and the
    tokens/s of that step time."""
    def step_ms(r):
        return r["step_ms"] + r.get("select_ms", 0.0)
    batch = statistics.median(r["batch_ms"] for r in records)
    step = statistics.median(step_ms(r) for r in records)
    batch_tokens = records[0]["tokens_per_s"] * step_ms(records[0]) / 1e3
    return dict(batch_ms=batch, step_ms=step, tokens_per_s=batch_tokens / (step / 1e3))


def speed_medians(rows):
    """{(schedule, arm): (median batch ms, median tokens/s, rounds)} over the
    rounds, in the order the rows first name them."""
    out = {}
    for r in rows:
        out.setdefault((r["schedule"], r["arm"]), []).append(r)
    return {k: (statistics.median(x["batch_ms"] for x in v),
                statistics.median(x["tokens_per_s"] for x in v), len(v)) for k, v in out.items()}


def write_speed(rows, path):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["schedule", "arm", "round", "batch_ms", "step_ms", "tokens_per_s", "load1"])
        for r in rows:
            w.writerow([r["schedule"], r["arm"], r["round"], "%.3f" % r["batch_ms"],
                        "%.3f" % r["step_ms"], "%.1f" % r["tokens_per_s"], "%.2f" % r["load1"]])


def print_speed(rows):
    medians = speed_medians(rows)
    base = {}
    print("%-14s %-20s %10s %10s %8s" % ("schedule", "arm", "batch ms", "tokens/s", "speedup"))
    for (schedule, arm), (batch, tps, n) in medians.items():
        base.setdefault(schedule, tps)
        print("%-14s %-20s %10.1f %10.0f %7.3fx" % (schedule, arm, batch, tps,
                                                     tps / base[schedule]))
    rounds = max(n for _, _, n in medians.values())
    print("(medians over %d %s; the first arm of each schedule is the reference)"
          % (rounds, "round" if rounds == 1 else "rounds"))
