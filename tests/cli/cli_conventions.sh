#!/usr/bin/env bash
# One option layer, one exit-code convention: the same mistake on the
# command line of tf-plan, tf-dot, tf-study, tf-import, tf-exec (and
# bench-solvers) gets the same exit status and the same words from each.
#   0 success, 1 bad input or a failure, 2 a bad command line, 3 the solver.
# Run by ctest with TF_PLAN, TF_DOT, TF_STUDY, TF_IMPORT, TF_EXEC and
# TF_BENCH_SOLVERS (when built).
. "$(dirname "$0")/../lib.sh"
need TF_PLAN TF_DOT TF_STUDY TF_IMPORT TF_EXEC

missing=$work/missing.json
# The five programs; what each takes besides the mistake under test (an
# input, for the programs that need one, that does not exist: the command
# line is refused before any file is read).
names=(tf-plan tf-dot tf-study tf-import tf-exec)
declare -A bin=([tf-plan]=$TF_PLAN [tf-dot]=$TF_DOT [tf-study]=$TF_STUDY
                [tf-import]=$TF_IMPORT [tf-exec]=$TF_EXEC)
declare -A base=([tf-plan]="$missing" [tf-dot]="$missing" [tf-study]="$missing"
                 [tf-import]="$missing -o $work/out.json" [tf-exec]="--steps 1")
declare -A solves=([tf-plan]=1 [tf-dot]=0 [tf-study]=1 [tf-import]=0 [tf-exec]=1)
if [ -n "${TF_BENCH_SOLVERS:-}" ]; then
    bin[bench-solvers]=$TF_BENCH_SOLVERS
    base[bench-solvers]=""
    solves[bench-solvers]=1
fi

# said WHAT LINE: the last command's stderr is exactly LINE.
said() {
    if [ "$(cat "$work/err")" = "$2" ]; then
        pass
    else
        fail "$1: stderr is not \"$2\""
        show_err
    fi
}

# said_like WHAT REGEX: the last command's stderr is one line matching REGEX.
said_like() {
    if [ "$(wc -l <"$work/err")" -eq 1 ] && grep -Eq -- "$2" "$work/err"; then
        pass
    else
        fail "$1: stderr is not one line like /$2/"
        show_err
    fi
}

# (a) An unknown option: 2, named as typed.
for p in "${!bin[@]}"; do
    # shellcheck disable=SC2086
    expect_status 2 "$p --frobnicate" "${bin[$p]}" ${base[$p]} --frobnicate
    said "$p --frobnicate" "$p: --frobnicate: unknown option (see --help)"
    # shellcheck disable=SC2086
    expect_status 2 "$p -Z" "${bin[$p]}" ${base[$p]} -Z
    said "$p -Z" "$p: -Z: unknown option (see --help)"
done

# (b) A bad value for an option they share: 2, and the same line.
for p in tf-plan tf-study tf-exec; do
    extra=(); [ "$p" = tf-exec ] && extra=(--auto-plan)
    # shellcheck disable=SC2086
    expect_status 2 "$p --solver bogus" "${bin[$p]}" ${base[$p]} "${extra[@]}" --solver bogus
    said "$p --solver bogus" "$p: --solver: expected auto, lp_solve, clp or fast, got \"bogus\""
done
for p in tf-plan tf-study tf-exec bench-solvers; do
    [ -n "${bin[$p]:-}" ] || continue
    extra=(); [ "$p" = tf-exec ] && extra=(--auto-plan)
    # shellcheck disable=SC2086
    expect_status 2 "$p --objective most" "${bin[$p]}" ${base[$p]} "${extra[@]}" --objective most
    said "$p --objective most" "$p: --objective: expected least-freeze or spread, got \"most\""
done
schedules="GPipe 1F1B Interleaved1F1B LoopedBFS InterleavedZeroBubble ZBVZeroBubble DualPipeV"
for p in tf-exec bench-solvers; do
    [ -n "${bin[$p]:-}" ] || continue
    # shellcheck disable=SC2086
    expect_status 2 "$p --schedule nope" "${bin[$p]}" ${base[$p]} --schedule nope
    said "$p --schedule nope" \
        "$p: --schedule: expected a built-in schedule ($schedules), got \"nope\""
done
# A word where a number is expected, in an option of each program.
declare -A numeric=([tf-plan]=--max-freeze-ratio [tf-dot]=--width [tf-study]=--jobs
                    [tf-import]=--steps [tf-exec]=--steps [bench-solvers]=--ranks)
for p in "${!bin[@]}"; do
    opt=${numeric[$p]}
    # shellcheck disable=SC2086
    expect_status 2 "$p $opt ten" "${bin[$p]}" ${base[$p]} "$opt" ten
    said_like "$p $opt ten" "^$p: $opt: expected [^\"]+, got \"ten\"\$"
    # shellcheck disable=SC2086
    expect_status 2 "$p $opt=ten" "${bin[$p]}" ${base[$p]} "$opt=ten"
    said_like "$p $opt=ten" "^$p: $opt: expected [^\"]+, got \"ten\"\$"
done
# A value missing at the end of the command line.
for p in "${!bin[@]}"; do
    opt=${numeric[$p]}
    # shellcheck disable=SC2086
    expect_status 2 "$p $opt (no value)" "${bin[$p]}" ${base[$p]} "$opt"
    said "$p $opt (no value)" "$p: $opt: missing value (see --help)"
done

# (c) A missing input file: 1, "PROG: PATH: cannot open: REASON".
declare -A reads=([tf-plan]="$missing" [tf-dot]="$missing" [tf-study]="$missing"
                  [tf-import]="$missing -o $work/out.json" [tf-exec]="--plan $missing")
for p in "${names[@]}"; do
    # shellcheck disable=SC2086
    expect_status 1 "$p on a missing file" "${bin[$p]}" ${reads[$p]}
    said "$p on a missing file" "$p: $missing: cannot open: No such file or directory"
done
check "no output written" [ ! -e "$work/out.json" ]

# (d) No arguments at all: 2 and the usage on stderr (bench-solvers runs
# its defaults then).
for p in "${names[@]}"; do
    expect_status 2 "$p alone" "${bin[$p]}"
    check "$p alone: usage on stderr" grep -q "^usage: $p " "$work/err"
    check "$p alone: nothing on stdout" [ ! -s "$work/out" ]
done

# (e) --help lists the statuses the program uses; --version the version.
for p in "${!bin[@]}"; do
    expect_status 0 "$p --help" "${bin[$p]}" --help
    for line in "exit status:" "  0  success" "  1  bad input" "  2  a bad command line"; do
        check "$p --help: \"$line\"" grep -q "^$line" "$work/out"
    done
    if [ "${solves[$p]}" = 1 ]; then
        check "$p --help: exit status 3" grep -q "^  3  the LP solver failed" "$work/out"
    else
        check "$p --help: no exit status 3" lacks "^  3  " "$work/out"
    fi
    check "$p --help: 80 columns" awk 'length > 79 { exit 1 }' "$work/out"
    [ "$p" = bench-solvers ] && continue
    expect_status 0 "$p --version" "${bin[$p]}" --version
    check "$p --version" grep -Eq "^$p [0-9]+\.[0-9]+\.[0-9]+\$" "$work/out"
done

finish "command-line conventions"
