#!/usr/bin/env bash
# run.sh [SECONDS] [TARGET...] - runs each libFuzzer target (default: all of
# fuzz_profile fuzz_plan fuzz_csv fuzz_study fuzz_checkpoint fuzz_import) for
# SECONDS (default 30) from a seed corpus of the repository's own files:
# bundled traces and examples, the golden schedules, profiles tf-study writes
# for the bundled study, plans tf-plan makes from all of these, a real
# checkpoint, and the synthetic torch.profiler runs of tests/import.  Needs a
# build configured with -DTF_FUZZ=ON (clang):
#
#   CC=clang cmake -S . -B build-fuzz -DTF_FUZZ=ON && cmake --build build-fuzz -j2
#   tests/fuzz/run.sh 30                          # what CI runs (ctest -R fuzz_short)
#   nice -n 19 tests/fuzz/run.sh 1200 fuzz_plan   # a long run of one target
#
# The build is $TF_BUILD_DIR (ctest sets it), else build-fuzz at the top of
# the tree.  New inputs accumulate in BUILD/fuzz/corpus/TARGET, so each run
# goes on from the last; a crash, leak, timeout or failed check leaves its
# input in BUILD/fuzz/artifacts/ and makes the script exit 1.  Each
# target's executions are printed at the end.  TF_FUZZ_FLAGS adds libFuzzer
# options, e.g. "-fork=1 -ignore_crashes=1" to go on past a finding and
# collect them all.  Reproduce a finding: BUILD/tests/fuzz/TARGET FILE.
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=${TF_BUILD_DIR:-$src/build-fuzz}
seconds=${1:-30}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_profile fuzz_plan fuzz_csv fuzz_study fuzz_checkpoint
                                     fuzz_import)
work=$build/fuzz
bin=$build/tests/fuzz

for t in "${targets[@]}"; do
    if [ ! -x "$bin/$t" ]; then
        echo "run.sh: $bin/$t is not built (configure with CC=clang -DTF_FUZZ=ON)" >&2
        exit 2
    fi
done
mkdir -p "$work/artifacts"
rm -rf "$work/seed"

# seed TARGET FILE...: copies files into TARGET's seed folder.
seed() {
    local t=$1
    shift
    mkdir -p "$work/seed/$t"
    [ $# -gt 0 ] && cp -- "$@" "$work/seed/$t/"
    return 0
}

# Profiles: the bundled traces, and what tf-study writes for its example.
# (Seeds are kept small: large inputs slow every execution down.)
mkdir -p "$work/seed/fuzz_profile"
seed fuzz_profile $(find "$src/traces" -name '*.json')
# ...and the planner's regression profiles, which each once broke a solver.
seed fuzz_profile "$src"/tests/planner/regressions/*.profile.json
if [ -x "$build/tools/tf-study" ]; then
    rm -rf "$work/study-profiles"
    "$build/tools/tf-study" "$src/tools/examples/llama8b-h200.json" -q -j 1 \
        --profiles "$work/study-profiles" >/dev/null 2>&1
    seed fuzz_profile $(find "$work/study-profiles" -name '*.json' -size -8k 2>/dev/null)
fi
# Plans: tf-plan on every profile seed (those under 64 KiB).
mkdir -p "$work/seed/fuzz_plan"
for p in "$work/seed/fuzz_profile"/*.json; do
    out=$work/seed/fuzz_plan/$(basename "$p" .json).plan.json
    "$build/planner/tf-plan" "$p" -q -o "$out" >/dev/null 2>&1
    [ ! -e "$out" ] || [ "$(stat -c %s "$out")" -lt 65536 ] || rm -f "$out"
done
seed fuzz_csv "$src"/tests/planner/golden/schedules/*.csv
seed fuzz_study "$src"/tools/examples/*.json
# A real checkpoint of the target's own model, written by the target.
mkdir -p "$work/seed/fuzz_checkpoint"
TF_FUZZ_SEED_DIR="$work/seed/fuzz_checkpoint" "$bin/fuzz_checkpoint" -runs=1 \
    >/dev/null 2>&1 </dev/null

# Traces: the synthetic runs tests/import writes, each run's rank traces
# joined by NUL bytes (a part "--frozen" starts a frozen run's traces).
mkdir -p "$work/seed/fuzz_import" "$work/import-gen"
if python3 "$src/tests/import/make_traces.py" "$src/tests/import/fixtures" "$work/import-gen" &&
    python3 "$src/tests/import/make_bad_runs.py" "$work/import-gen"; then
    joined() { # joined OUT PART...: the parts, NUL between them
        local out=$1 first=1 p
        shift
        : >"$out"
        for p in "$@"; do
            [ $first -eq 1 ] || printf '\0' >>"$out"
            first=0
            case $p in --frozen) printf -- '--frozen' >>"$out" ;; *) cat "$p" >>"$out" ;; esac
        done
    }
    g=$work/import-gen
    joined "$work/seed/fuzz_import/kineto" "$g/kineto-rank0.json" "$g/kineto-rank1.json"
    joined "$work/seed/fuzz_import/memory" "$g/kineto-mem-rank0.json" "$g/kineto-mem-rank1.json"
    joined "$work/seed/fuzz_import/dualpipev" "$g/dualpipev-rank0.json" "$g/dualpipev-rank1.json"
    joined "$work/seed/fuzz_import/legacy" "$g/1f1b-rank0.json" "$g/1f1b-rank1.json"
    joined "$work/seed/fuzz_import/frozen" "$g/1f1b-rank0.json" "$g/1f1b-rank1.json" --frozen \
        "$g/1f1b-again-rank1.json" "$g/1f1b-again-rank0.json"
    joined "$work/seed/fuzz_import/deadlock" "$g/1f1b-rank0.json" "$g/gpipe-rank1.json"
    joined "$work/seed/fuzz_import/skewed" "$g/kineto-rank0.json" "$g/5ms-rank1.json"
fi

# Inputs of earlier findings, kept in the tree: each must pass again.
for d in "$here"/regressions/*/; do
    [ -d "$d" ] && seed "$(basename "$d")" "$d"*
done

failed=0
summary=()
for t in "${targets[@]}"; do
    mkdir -p "$work/corpus/$t"
    dict=()
    [ "$t" = fuzz_csv ] || [ "$t" = fuzz_checkpoint ] || dict=(-dict="$here/json.dict")
    log=$work/$t.log
    before=$(find "$work/artifacts" -name "$t-*" | wc -l)
    echo "run.sh: $t for $seconds s (log $log)" >&2
    # shellcheck disable=SC2086 # TF_FUZZ_FLAGS is a list of options
    "$bin/$t" -max_total_time="$seconds" -timeout=25 -rss_limit_mb=2560 -print_final_stats=1 \
        ${TF_FUZZ_FLAGS:-} "${dict[@]}" \
        -artifact_prefix="$work/artifacts/$t-" "$work/corpus/$t" "$work/seed/$t" >"$log" 2>&1
    rc=$?
    # One process prints stat::; -fork=N prints "#EXECS: cov: ..." lines.
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    [ -n "$execs" ] || execs=$(sed -n 's/^#\([0-9]*\): cov:.*/\1/p' "$log" | tail -1)
    found=$(($(find "$work/artifacts" -name "$t-*" | wc -l) - before))
    summary+=("$t: ${execs:-?} executions, $found new findings, exit $rc")
    if [ $rc -ne 0 ] || [ $found -gt 0 ]; then
        failed=1
        echo "run.sh: $t found something (exit $rc):" >&2
        grep -E 'ERROR|fuzz check failed|SUMMARY|Test unit written' "$log" | head -20 >&2
    fi
done
printf '%s\n' "${summary[@]}"
exit $failed
