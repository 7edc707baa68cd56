# lib.sh - the harness every shell test sources.
#
#   . "$(dirname "$0")/../lib.sh"      # from tests/<area>/<script>.sh
#   need TF_PLAN TF_SOURCE_DIR         # fail at once when ctest did not set them
#   expect_status 0 "good run" "$TF_PLAN" profile.json -o "$work/plan.json"
#   expect_stderr "good run" "speedup"
#   expect_refused "bad cap" "max_freeze_ratio" "$work/plan.json" -- "$TF_PLAN" ...
#   finish "tf-plan CLI"
#
# Every command runs with its stdout in $work/out and its stderr in
# $work/err.  A check that fails prints "FAIL: what" with the command's
# stderr and counts; `finish` prints the tally and exits 1 if any failed.
# $work is a fresh folder, removed on exit unless KEEP is set.

set -u
tl_passed=0
tl_failed=0
work=$(mktemp -d "${TMPDIR:-/tmp}/tf_test.XXXXXX")
tl_cleanup_hooks=()

tl_cleanup() {
    local hook
    for hook in "${tl_cleanup_hooks[@]}"; do eval "$hook"; done
    if [ -n "${KEEP:-}" ]; then echo "kept $work"; else rm -rf "$work"; fi
}
trap tl_cleanup EXIT

# on_exit COMMAND: runs COMMAND (a string) before $work is removed.
on_exit() { tl_cleanup_hooks+=("$1"); }

# need VAR...: each must be set (ctest passes the programs' paths).
need() {
    local v
    for v in "$@"; do
        if [ -z "${!v:-}" ]; then
            echo "FAIL: $v is not set (run this script through ctest)" >&2
            exit 2
        fi
    done
}

pass() { tl_passed=$((tl_passed + 1)); }

# fail WHAT: counts a failure and says what failed.
fail() {
    tl_failed=$((tl_failed + 1))
    echo "FAIL: $*" >&2
}

# show_err: the last command's stderr, indented (after a failure).
show_err() { sed 's/^/    stderr: /' "$work/err" >&2; }

# check WHAT COMMAND...: passes when COMMAND succeeds (a test, a grep...).
check() {
    local what=$1
    shift
    if "$@"; then pass; else fail "$what"; fi
}

# lacks NEEDLE FILE: FILE does not contain NEEDLE (for check).
lacks() { ! grep -q -- "$1" "$2"; }

# cpu_bounded SECONDS COMMAND...: runs COMMAND with at most SECONDS of CPU
# time (user + system) for it and for each process it starts (past it the
# kernel kills that process: exit 137), for checks that work is bounded: a
# refusal of huge input, a solve that must not cycle.  CPU time, not the
# wall clock: other jobs on the same cores stretch the wall clock tenfold
# and the CPU time hardly at all.  Under AddressSanitizer the stack is
# unwound the fast way on malloc: the GRAPHVIZ tests' slow unwinder (which
# Graphviz's leak suppressions need; the commands bounded here draw
# nothing) costs some 15 times the CPU time on a large JSON input.
cpu_bounded() {
    local seconds=$1
    shift
    (ulimit -t "$seconds" &&
        ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=1" exec "$@")
}

# run COMMAND...: runs it with output in $work/out and $work/err; sets $rc.
run() {
    "$@" >"$work/out" 2>"$work/err"
    rc=$?
}

# expect_status WANT WHAT COMMAND...: the command must exit with WANT.
expect_status() {
    local want=$1 what=$2
    shift 2
    run "$@"
    if [ "$rc" -eq "$want" ]; then
        pass
    else
        fail "$what: exit status $rc, expected $want"
        show_err
    fi
}

# expect_stderr WHAT NEEDLE: the last command's stderr contains NEEDLE.
expect_stderr() {
    if grep -qF -- "$2" "$work/err"; then
        pass
    else
        fail "$1: stderr lacks \"$2\""
        show_err
    fi
}

# expect_stdout WHAT NEEDLE: the last command's stdout contains NEEDLE.
expect_stdout() {
    if grep -qF -- "$2" "$work/out"; then
        pass
    else
        fail "$1: stdout lacks \"$2\""
        sed 's/^/    stdout: /' "$work/out" >&2
    fi
}

# expect_refused WHAT NEEDLE [FILE...] -- COMMAND...: bad input.  The
# command must exit non-zero but not by a signal (128 and up), name NEEDLE
# on stderr, leave each FILE byte for byte as it was (create them first) and
# leave no temporary FILE.* beside them.
expect_refused() {
    local what=$1 needle=$2
    shift 2
    local files=() sums=() f
    while [ $# -gt 0 ] && [ "$1" != -- ]; do files+=("$1"); shift; done
    shift
    for f in "${files[@]}"; do sums+=("$(cksum <"$f" 2>/dev/null)"); done
    run "$@"
    if [ "$rc" -eq 0 ]; then
        fail "$what: exit status 0, expected an error"; return
    fi
    if [ "$rc" -ge 128 ]; then
        fail "$what: killed by a signal (exit $rc)"; show_err; return
    fi
    if ! grep -qF -- "$needle" "$work/err"; then
        fail "$what: stderr lacks \"$needle\""; show_err; return
    fi
    local i
    for i in "${!files[@]}"; do
        f=${files[$i]}
        if [ "$(cksum <"$f" 2>/dev/null)" != "${sums[$i]}" ]; then
            fail "$what: $f was changed"; return
        fi
        if ls "$f".* >/dev/null 2>&1; then
            fail "$what: a temporary file was left beside $f"; return
        fi
    done
    pass
}

# expect_refused_with STATUS WHAT NEEDLE [FILE...] -- COMMAND...: as
# expect_refused, and the command must exit with STATUS exactly (1 for bad
# input, 2 for a usage error...).
expect_refused_with() {
    local want=$1 what=$2
    shift
    expect_refused "$@"
    check "$what: exit status $rc, expected $want" [ "$rc" -eq "$want" ]
}

# finish NAME: prints the tally; exits 1 when a check failed.
finish() {
    echo "$1: $tl_passed passed, $tl_failed failed"
    [ "$tl_failed" -eq 0 ] || exit 1
    exit 0
}
