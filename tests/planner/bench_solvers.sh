#!/usr/bin/env bash
# Smoke test of bench-solvers on a tiny size: exit 0, every solver that is
# there finishes, lp_solve, fast and CLP (and HiGHS and SciPy when
# installed) report the same batch time (1e-9 relative) and total freeze
# (1e-6); the time limit kills a solve (and the Python of HiGHS's) and
# reports "timeout"; a missing Python solver says so; bad options are usage
# errors naming the flag.  --save-profiles writes a profile that tf-plan plans to the
# bench's batch time, and refuses to overwrite it; --stage-times drops the
# per-action times.
# Also the instances where the fast solver once stopped at a wrong answer
# and lp_solve once cycled or aborted, both objectives.
# Run by ctest with TF_BENCH_SOLVERS and TF_PLAN set.
. "$(dirname "$0")/../lib.sh"
need TF_BENCH_SOLVERS TF_PLAN
bench=$TF_BENCH_SOLVERS

# agree FILE [REFERENCE [FREEZE_REL]]: every solver row of bench-solvers output
# FILE is ok and agrees with REFERENCE's (default lp_solve, which must be
# there, beside the speed-up row): the same batch time (1e-9 relative) and
# total freeze (1e-6, or FREEZE_REL relative).
# Columns by header name; rows: actions micro solver status ...
agree() {
  awk -v ref="${2:-lp_solve}" -v rel="${3:-0}" '
    $1 == "actions" { for (i = 1; i <= NF; i++) col[$i] = i; next }
    !("solver" in col) || $1 !~ /^[0-9]+$/ { next }
    $3 == "speed-up" { speedup = 1; next }
    ($3 == "highs" || $3 == "scipy") && ($4 == "not" || $4 == "n/a") { next }
    $4 != "ok" && $4 != "fallback" { print "row not ok: " $0; bad = 1; next }
    { t[$3] = $col["batch_ms"]; f[$3] = $col["total_freeze"] }
    END {
      if (!("fast" in t)) { print "fast row missing"; exit 1 }
      if (ref == "lp_solve" && !("lp_solve" in t)) { print "lp_solve row missing"; exit 1 }
      if (ref == "lp_solve" && !speedup) { print "no speed-up row"; bad = 1 }
      if (!(ref in t)) exit bad
      for (s in t) {
        dt = t[s] - t[ref]; if (dt < 0) dt = -dt
        df = f[s] - f[ref]; if (df < 0) df = -df
        if (dt > 1e-9 * t[ref] || df > (rel ? rel * f[ref] : 1e-6)) {
          print s " disagrees with " ref; bad = 1
        }
      }
      exit bad
    }' "$1"
}

# solvers_agree NAME BENCH-ARGS...: exit 0 and every solver agrees.  Each
# solve (a child of the bench) must finish within 200 s of CPU time, or it
# is killed and its row is not ok: the slowest, lp_solve on Interleaved1F1B
# 4 ranks with spread, takes 69 s of CPU with AddressSanitizer but up to
# 210 s of wall time at a load of 10 on 2 cores, so the bench's own
# wall-clock limit is set out of the way.
solvers_agree() {
  local name=$1
  shift
  expect_status 0 "$name: exit" cpu_bounded 200 "$bench" --limit 3600 "$@"
  check "$name: figures" agree "$work/out"
}

solvers_agree "smoke" 256
check "speed-up of fast" grep -q 'speed-up  fast over lp_solve [0-9.]*x' "$work/out"

# A binding memory limit: lp_solve and CLP solve the memory rows, the fast
# solver hands them to a general one (its row says fallback: lp_solve below
# 1,024 actions, CLP from there on), all give the same plan, and the
# solvers without memory rows say so.
solvers_agree "memory limit" --solvers=lp_solve,fast,clp,highs --memory 0.5 128
check "memory limit: said" grep -q "^memory: 128 actions, every rank's limit" "$work/out"
check "memory limit: the fast row is lp_solve's, by the fallback" \
  grep -Eq '^ +128 +[0-9]+ +fast +fallback' "$work/out"
check "memory limit: HiGHS has no memory rows" \
  grep -q 'highs     n/a       (time only: no memory rows)' "$work/out"
# 1F1B with recomputation: every F keeps activations and every B brings back
# what its recomputation dropped, so each of the 128 actions has a row that
# can raise the bytes; a limit that binds leaves at least one of them at it.
check "memory limit: its rows counted, some at the limit" \
  awk '/^ +128 +[0-9]+ +lp_solve/ { want = 1; next }
       want && $1 == "memory" && $2 == "rows" {
         rows = $3 + 0; at = $10 + 0; seen = 1; exit !(rows == 128 && at >= 1 && at <= rows) }
       want { exit 1 }
       END { if (!seen) exit 1 }' "$work/out"
expect_status 0 "memory limit, 1,024 actions: exit" cpu_bounded 200 "$bench" --limit 3600 \
  --solvers=lp_solve,fast,clp --memory 0.5 --save-profiles "$work" 1024
check "memory limit, 1,024 actions: figures" agree "$work/out"
check "memory limit, 1,024 actions: the fast row is CLP's, by the fallback" \
  grep -Eq '^ +1024 +[0-9]+ +fast +fallback' "$work/out"
# auto gives such a limit to CLP from 1,024 actions on, and the fast
# solver's fallback names CLP.
expect_status 0 "memory limit, 1,024 actions: auto" "$TF_PLAN" "$work/profile-1024.json" \
  -o "$work/mem-auto.json"
check "memory limit, 1,024 actions: auto picks clp" grep -Eq '^solver +clp [0-9.]+ \(auto\)' \
  "$work/out"
expect_status 0 "memory limit, 1,024 actions: fast" "$TF_PLAN" "$work/profile-1024.json" \
  --solver fast -o "$work/mem-fast.json"
check "memory limit, 1,024 actions: the fallback is clp" grep -Eq '^fallback +clp solved it' \
  "$work/out"
# A limit that every unfrozen peak meets adds no rows, and says none.
expect_status 0 "memory limit that binds nowhere: exit" \
  "$bench" --solvers=lp_solve --memory 1 128
check "memory limit that binds nowhere: no rows" lacks "memory rows" "$work/out"

# Regressions.  lp_solve's default dual simplex cycles on Interleaved1F1B
# 4 x 64: the guard in freeze_lpsolve.c stops it and re-solves with the primal
# simplex (for spread, from the slack basis, with a larger guard).  The fast
# solver's master duals once drifted to 1e12 there and on the next two,
# and it stopped with a total freeze up to 0.33 above the optimum.  (The
# Python solvers, whose rows start Python each time, only in the smoke run.)
native=--solvers=lp_solve,fast,clp
solvers_agree "Interleaved1F1B 4 ranks" $native --schedule Interleaved1F1B --ranks 4 1024
solvers_agree "Interleaved1F1B 4 ranks, spread" $native --schedule Interleaved1F1B --ranks 4 \
  --objective spread 1024
solvers_agree "Interleaved1F1B 8 ranks" $native --schedule Interleaved1F1B --ranks 8 1024
solvers_agree "ZBVZeroBubble 2 ranks" $native --schedule ZBVZeroBubble --ranks 2 1024
# The least-freeze stage's first pass ends early here, on a slack that has
# settled, and the penalty grows before that pass has converged
# (slack_settled in freeze_fast.c; seen with a temporary counter): the
# answer must still be lp_solve's.
solvers_agree "1F1B 24 ranks" $native --ranks 24 1024
# Every cap binds at a positive price in the batch-time optimum, so the
# least-freeze stage ends on the floor that proof gives (total_ratio_floor),
# where its column generation had taken 8.9 s of rounds to prove it.
solvers_agree "Interleaved1F1B 12 ranks x 3" $native --schedule Interleaved1F1B --ranks 12 \
  --stages-per-rank 3 360

# At 2,592 actions the least-freeze stage's penalty climbs to 1e6, where a
# point already in the master came back with a reduced cost of -2.5e-8,
# inside the pricing's round-off, and was added again round after round (not
# finished in 60 s).  The fast solver must finish at CLP's batch time
# (1e-9), and its total freeze within 1e-6 relative of CLP's: the stage is
# ill-conditioned there (about 3e6 of freezing per ms of batch time), and
# lp_solve takes over 10 minutes.
expect_status 0 "Interleaved1F1B 12 ranks x 3, 2,592 actions: exit" cpu_bounded 600 "$bench" \
  --limit 3600 --solvers=fast,clp --schedule Interleaved1F1B --ranks 12 --stages-per-rank 3 2592
check "Interleaved1F1B 12 ranks x 3, 2,592 actions: fast finishes near CLP" \
  agree "$work/out" clp 1e-6

# Every cap binds at a positive price: the batch-time proof's floor ends the
# total-ratio stage (FLOOR_TOL in freeze_fast.c).
expect_status 0 "GPipe 32 ranks, 2,048 actions: exit" cpu_bounded 200 "$bench" --limit 3600 \
  --solvers=fast,clp --schedule GPipe --ranks 32 2048
check "GPipe 32 ranks, 2,048 actions: fast agrees with CLP" agree "$work/out" clp 1e-6
check "GPipe 32 ranks, 2,048 actions: the speed-up over CLP" \
  grep -Eq '^ +2048 +32 +speed-up +fast over clp [0-9.]+x$' "$work/out"

# Counts of one in the singular: the header, and too few actions for a microbatch.
expect_status 0 "one rank" "$bench" --ranks 1 --solvers fast 2
expect_stdout "one rank: singular counts" "1F1B, 1 rank x 1 stage per rank"
run "$bench" --ranks 1 --solvers fast 1
expect_stderr "one action" "1 action is fewer than one microbatch (2 actions on 1 rank x 1 stage)"

# "--option=value" as getopt takes it (bench-solvers has no short option
# that takes a value).
expect_status 0 "--option=value" "$bench" --schedule=GPipe --ranks=2 --solvers=fast --limit=60 16
expect_stdout "--option=value" "bench-solvers: GPipe, 2 ranks x 1 stage per rank"
expect_stdout "--option=value" "limit 60 s per solve"

# A limit far below the solve time: killed, reported, still exit 0.
expect_status 0 "timeout" "$bench" --limit 0.001 --solvers lp_solve 2048
check "timeout: reported" grep -Eq '^ +2048 +128 +lp_solve +timeout' "$work/out"

# The Python solvers missing: their rows say why, the others run, exit 0.
expect_status 0 "missing Python solvers" "$bench" --python "$work/none/python" \
  --solvers fast,highs,scipy 256
check "missing HiGHS: said" grep -Eq \
  "^ +256 +16 +highs +not installed \\($work/none/python cannot import highspy\\)" "$work/out"
check "missing SciPy: said" grep -Eq \
  "^ +256 +16 +scipy +not installed \\($work/none/python cannot import scipy\\)" "$work/out"

# HiGHS installed: a timeout kills its Python with the child (its process
# group).  The LP file goes under TMPDIR, so that pgrep sees this test's
# Python only, not that of a benchmark running beside it.
run "$bench" --solvers highs --limit 600 256
if [ "$rc" -eq 0 ] && ! grep -q 'not installed' "$work/out"; then
  mkdir "$work/tmp"
  expect_status 0 "HiGHS timeout" env TMPDIR="$work/tmp" "$bench" --limit 0.5 --solvers highs 8192
  check "HiGHS timeout: reported" grep -Eq '^ +8192 +512 +highs +timeout' "$work/out"
  sleep 1
  # [s]: the pattern must not match the command line of the bash running it.
  check "Python still running after the timeout" \
    bash -c "! pgrep -f '[s]olve_lp.py highs $work/tmp/tf-bench-pylp' > /dev/null"
fi

# --save-profiles: tf-plan, JSON in and out, finds the bench's batch time.
mkdir "$work/profiles"
expect_status 0 "--save-profiles" "$bench" --solvers fast --save-profiles "$work/profiles" 256
cp "$work/out" "$work/bench.out"
expect_status 0 "tf-plan on a saved profile" "$TF_PLAN" "$work/profiles/profile-256.json" \
  -o "$work/plan.json" --solver fast
check "--save-profiles and tf-plan: same batch time" \
  python3 - "$work/bench.out" "$work/plan.json" <<'PY'
import json, sys
rows = [line.split() for line in open(sys.argv[1])]
header = next(r for r in rows if r[:1] == ["actions"])
fast = next(r for r in rows if len(r) > 3 and r[2] == "fast")
bench_ms = float(fast[header.index("batch_ms")])
plan_ms = json.load(open(sys.argv[2]))["batch_ms"]["planned"]
sys.exit(0 if abs(plan_ms - bench_ms) <= 1e-9 * bench_ms else 1)
PY
# --stage-times: every action its stage's time, so the saved profile lists no
# action's own and every microbatch's forward on a stage takes as long; the
# solvers agree on that far more degenerate LP too.  On these two the
# batch-time stage's last pricing ends at the slow end of its optimal face,
# above the least-freeze stage's bound, so that stage starts from a point
# priced again to meet it (price_within_bound in freeze_fast.c; seen with a
# temporary trace).
mkdir "$work/stage"
solvers_agree "stage-level times" $native --stage-times --save-profiles "$work/stage" 768
check "stage-level times: said" grep -q ', stage-level times, caps 0.8' "$work/out"
solvers_agree "stage-level times, GPipe" $native --stage-times --schedule GPipe --ranks 4 512
# Where a pricing's network simplex starts (solve_pricing, price_within_bound
# in freeze_fast.c; each seen with a temporary trace): at 2,048 actions a
# long walk at the master's duals gives way to a fresh start from the guess,
# which finishes; on Interleaved1F1B 4 ranks the guess does not finish, three
# times, and the walks resume; there, and on GPipe 4 ranks at 2,048, the
# raised pricing before the bounded stage is cut short and the bounded stage
# starts from the fastest tree.  The answers must stay lp_solve's.
solvers_agree "stage-level times, 2,048 actions" $native --stage-times 2048
solvers_agree "stage-level times, Interleaved1F1B 4 ranks" $native --stage-times \
  --schedule Interleaved1F1B --ranks 4 1024
solvers_agree "stage-level times, GPipe 2,048 actions" $native --stage-times --schedule GPipe \
  --ranks 4 2048
expect_status 0 "stage-level times: planned from the saved profile" "$TF_PLAN" \
  "$work/stage/profile-768.json" -o "$work/stage-plan.json" --solver fast
check "stage-level times: no per-action times, equal forwards per stage" \
  python3 - "$work/stage/profile-768.json" "$work/stage-plan.json" <<'PY'
import json, sys
profile, plan = (json.load(open(p)) for p in sys.argv[1:3])
forwards = {}
for a in plan["actions"]:
    if a["type"] == "F":
        forwards.setdefault(a["stage"], set()).add(a["ms"])
sys.exit(0 if "actions" not in profile and all(len(v) == 1 for v in forwards.values())
         and len(forwards) == 8 else 1)
PY
run "$bench" --solvers fast --save-profiles "$work/profiles" 256
check "--save-profiles over an existing file: refused" [ "$rc" -ne 0 ]
expect_stderr "--save-profiles over an existing file" "profile-256.json exists; not overwritten"

# Usage errors name the flag and the value.
usage_error() {
  local part=$1
  shift
  expect_status 2 "$*" "$bench" "$@"
  expect_stderr "$*" "$part"
}
usage_error '--schedule: expected a built-in schedule (GPipe 1F1B' --schedule Zigzag 256
usage_error ', got "Zigzag"' --schedule Zigzag 256
usage_error '--limit: expected a number in (0, 86400], got "-1"' --limit -1 256
usage_error '--solvers: expected a comma-separated list' --solvers lp_solve,simplex 256
usage_error '--python: expected a file name' --python "" 256
usage_error '--ranks: expected an integer' --ranks 0 256
usage_error '--ranks: expected an integer in [1, 4096], got "0"' --ranks=0 256
usage_error '--objective: expected least-freeze or spread, got "spready"' --objective spready 256
usage_error 'ACTIONS: expected an integer' 2k
expect_status 0 "--help" "$bench" --help
expect_stdout "--help" 'usage: bench-solvers'

finish "bench-solvers smoke"
