#!/usr/bin/env bash
# One schedule's torch 2 fixtures (fixtures/torch2-<NAME>-*.json.gz: real
# torch.distributed.pipelining runs under PyTorch 2.15, fixtures/README.md):
# tf-import reads the run with its fully frozen run and recognises the
# schedule by name, tf-plan plans the profile, and each rank's order in the
# plan is the order the trace ran.  The run trained with that plan imports
# too.  Standard library only (no torch).
#
#   torch2_schedule.sh NAME      (run by ctest as import_torch2_<NAME>)
#
# The traces are read as the profiler wrote them, the multi-stage
# schedules' wait spans (PP:<s>WAIT_SEND_F<m>, PP:<s>WAIT_SEND_B<m>,
# PP:<s>WAIT_REDUCE_GRAD) included: tf-import passes over them.
. "$(dirname "$0")/../lib.sh"
need TF_IMPORT TF_PLAN TF_SOURCE_DIR
name=${1:?usage: torch2_schedule.sh SCHEDULE}
here=$TF_SOURCE_DIR/tests/import
fx=$here/fixtures

for run in unfrozen frozen planned; do
  for r in 0 1; do
    expect_status 0 "$name: $run rank $r readable" sh -c 'gzip -dc "$1" > "$2"' sh \
      "$fx/torch2-$name-$run-rank$r.json.gz" "$work/$run$r.json"
  done
done

# The frozen runs froze every parameter, so no stage's backward waited for
# a later stage's gradient (there was none): tf-import, which checks that
# each action ends after what it takes from another rank, would read that
# as clocks out of step.  --p2p-ms 0 imports them without that check (and
# without a measured lag, which this test does not look at).
expect_status 0 "$name: import with the frozen run" "$TF_IMPORT" "$work"/unfrozen{0,1}.json \
  --frozen "$work"/frozen{0,1}.json --p2p-ms 0 -o "$work/profile.json"
expect_stderr "$name: the order is PyTorch's $name" "schedule $name;"
check "$name: the profile names the schedule, no explicit order" \
  python3 -c 'import json, sys
p = json.load(open(sys.argv[1]))
sys.exit(0 if p["schedule"] == sys.argv[2] and "order" not in p else 1)' \
  "$work/profile.json" "$name"
expect_status 0 "$name: tf-plan plans it" "$TF_PLAN" "$work/profile.json" -q \
  -o "$work/plan.json"
python3 "$here/trace_medians.py" --order "$work"/unfrozen{0,1}.json > "$work/order.json"
check "$name: each rank's order in the plan is the trace's" python3 - "$work/plan.json" \
  "$work/order.json" <<'PY'
import json, sys
plan, traced = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
planned = [[f"{a['stage']}{a['type']}{a['microbatch']}" for a in plan["actions"]
            if a["rank"] == r and a["type"] != "R"] for r in range(plan["ranks"])]
if planned != traced:
    sys.exit(f"plan {planned}\ntrace {traced}")
PY
expect_status 0 "$name: the planned run imports" "$TF_IMPORT" "$work"/planned{0,1}.json \
  -o "$work/planned.json"
expect_stderr "$name: the planned run's order" "schedule $name;"

finish "torch 2 traces: $name"
