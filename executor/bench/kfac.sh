#!/usr/bin/env bash
# What K-FAC statistics in the ranks' waits cost the step (CPU backend).
# Usage:
#   executor/bench/kfac.sh BUILD_DIR [OUT_DIR] [REPEATS] [-- TF-EXEC OPTIONS...]
# For 1F1B and GPipe on 2 ranks (4 microbatches) and 4 ranks (8
# microbatches), REPEATS times (default 3), it runs tf-exec without and with
# --kfac-stats back to back (the order alternating between repeats), and
# prints per configuration: the median batch time of each run (the first
# two steps left out), the ratio with / without per repeat and its range,
# the machine's load (`uptime`, taken before each run), and from
# --kfac-log what the waits absorbed per step (items and ms over all
# ranks), what was left pending and dropped, the refresh interval in steps,
# and two costs on the step's path: late_ms
# (chunks during which an awaited message arrived: a bound on the delay the
# work added to receives) and the copies of inputs about to be overwritten.
# It asserts nothing.
# Options after -- go to every tf-exec (e.g. a smaller model); KFAC_OPTIONS
# (e.g. "--kfac-sample 0.125") to the runs with --kfac-stats only.
set -eu
build=${1:?usage: kfac.sh BUILD_DIR [OUT_DIR] [REPEATS] [-- TF-EXEC OPTIONS...]}
shift
out=
repeats=3
if [ $# -gt 0 ] && [ "$1" != -- ]; then out=$1; shift; fi
[ -n "$out" ] || out=$(mktemp -d /tmp/tf_kfac.XXXXXX)
if [ $# -gt 0 ] && [ "$1" != -- ]; then repeats=$1; shift; fi
[ $# -gt 0 ] && [ "$1" = -- ] && shift
extra=("$@")
mkdir -p "$out"
exec_bin="$build/executor/tf-exec"
steps=12

# run TAG MODE RANKS MICROBATCHES SCHEDULE
run() {
    local tag=$1 mode=$2 ranks=$3 mbs=$4 schedule=$5
    local stats=()
    # shellcheck disable=SC2206 # KFAC_OPTIONS is a list of words
    [ "$mode" = on ] && stats=(--kfac-stats --kfac-log "$out/$tag.kfac.jsonl" ${KFAC_OPTIONS:-})
    uptime >"$out/$tag.uptime"
    "$exec_bin" --schedule "$schedule" --ranks "$ranks" --microbatches "$mbs" --steps "$steps" \
        --progress lines "${extra[@]}" "${stats[@]}" --log "$out/$tag.jsonl" >"$out/$tag.out"
}

for ((k = 1; k <= repeats; k++)); do
    for schedule in 1F1B GPipe; do
        for shape in "2 4" "4 8"; do
            read -r ranks mbs <<<"$shape"
            order="off on"
            [ $((k % 2)) -eq 0 ] && order="on off"
            for mode in $order; do
                run "$schedule-r$ranks-$mode-$k" "$mode" "$ranks" "$mbs" "$schedule"
            done
        done
    done
done

echo "## K-FAC statistics in the waits: $(nproc) cores, ${extra[*]:-default model}," \
    "${KFAC_OPTIONS:-every token}, $repeats runs"
echo
python3 - "$out" "$repeats" <<'PY'
import glob, json, os, statistics, sys

out, repeats = sys.argv[1], int(sys.argv[2])


def batch_ms(tag):
    rows = [json.loads(l) for l in open(os.path.join(out, tag + ".jsonl"))]
    return statistics.median(r["batch_ms"] for r in rows[2:])


def load(tag):
    text = open(os.path.join(out, tag + ".uptime")).read()
    return text.split("load average:")[1].split(",")[0].strip()


def kfac(tag):
    rows = [json.loads(l) for l in open(os.path.join(out, tag + ".kfac.jsonl"))]
    steps = max(r["step"] for r in rows)
    ranks = sorted({r["rank"] for r in rows})
    last = [r for r in rows if r["step"] == steps]
    refresh = [r["refresh_steps"] for r in rows if r["refresh_steps"]]
    return {
        "items": sum(r["aux_items"] for r in rows) / steps,
        "ms": sum(r["aux_ms"] for r in rows) / steps,
        "late": sum(r["late_ms"] for r in rows) / steps,
        "copied": sum(r["copied"] for r in rows) / steps,
        "pending": sum(r["pending"] for r in last),
        "dropped": sum(r["dropped"] for r in rows),
        "refresh": max(refresh) if refresh else None,
        "ranks": len(ranks),
    }


print("| config | repeat | off ms (load) | on ms (load) | on/off | absorbed items/step | "
      "absorbed ms/step | late ms/step | copied/step | pending at end | dropped | "
      "refresh steps |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
summary = {}
for schedule in ("1F1B", "GPipe"):
    for ranks in (2, 4):
        for k in range(1, repeats + 1):
            base = f"{schedule}-r{ranks}"
            off, on = f"{base}-off-{k}", f"{base}-on-{k}"
            a, b = batch_ms(off), batch_ms(on)
            s = kfac(on)
            summary.setdefault(base, []).append(b / a)
            refresh = s["refresh"] if s["refresh"] else "none"
            print(f"| {schedule} {ranks} ranks | {k} | {a:.1f} ({load(off)}) | "
                  f"{b:.1f} ({load(on)}) | {b / a:.3f} | {s['items']:.1f} | {s['ms']:.1f} | "
                  f"{s['late']:.2f} | {s['copied']:.1f} | {s['pending']} | {s['dropped']} | "
                  f"{refresh} |")
print()
print("| config | on/off median | range |")
print("|---|---|---|")
for base, ratios in summary.items():
    print(f"| {base} | {statistics.median(ratios):.3f} | {min(ratios):.3f} .. {max(ratios):.3f} |")
PY
