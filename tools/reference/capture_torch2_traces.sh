#!/usr/bin/env bash
# The torch 2 traces of tf-import's fixtures (tests/import/fixtures/torch2-*),
# captured from real torch.distributed.pipelining runs of every schedule
# PyTorch has, and the loop each closes:
#
#   bash tools/reference/capture_torch2_traces.sh OUT [SCHEDULE...]
#
# For each schedule (default: all seven) three runs of torch_pipeline.py, each
# profiling one step after two (ProfilerStep#2): OUT/<schedule>/unfrozen,
# OUT/<schedule>/frozen (torch_pipeline.py's $FROZEN, default --frozen: every
# parameter but one bias of the first stage) and OUT/<schedule>/planned
# (trained with the plan that tf-import and tf-plan make from the first two:
# OUT/<schedule>/profile.json and plan.json).  Each holds rank0.json.gz and
# rank1.json.gz.  The model is tiny (one block of width 32 per stage, 4 rows
# per microbatch, 4 microbatches, 2 ranks) so that the traces stay small.
#
# PY (default .venv-torch/bin/python), TF_IMPORT and TF_PLAN (default
# build/tools/import/tf-import and build/planner/tf-plan) name the programs.
# tf-import passes over the runtime's wait spans; the copies this script
# imports leave them out (drop_wait_spans.py), which changes nothing it reads.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
py=${PY:-$root/.venv-torch/bin/python}
tf_import=${TF_IMPORT:-$root/build/tools/import/tf-import}
tf_plan=${TF_PLAN:-$root/build/planner/tf-plan}
out=${1:?usage: capture_torch2_traces.sh OUT [SCHEDULE...]}
shift
schedules=("$@")
[ ${#schedules[@]} -gt 0 ] || schedules=(GPipe 1F1B Interleaved1F1B LoopedBFS
                                          InterleavedZeroBubble ZBVZeroBubble DualPipeV)
shape=(--ranks 2 --microbatches 4 --layers 1 --width 32 --rows 4 --steps 1 --warmup-steps 2)

# importable DIR: DIR's traces as tf-import reads them today, in DIR/import.
importable() {
  mkdir -p "$1/import"
  for r in 0 1; do
    python3 "$here/drop_wait_spans.py" "$1/rank$r.json.gz" "$1/import/rank$r.json" 2> /dev/null
  done
}

for s in "${schedules[@]}"; do
  dir=$out/$s
  for run in unfrozen frozen; do
    flags=()
    [ "$run" = frozen ] && flags=("${FROZEN:---frozen}")
    "$py" "$here/torch_pipeline.py" --schedule "$s" "${shape[@]}" "${flags[@]}" \
      --profile "$dir/$run" --gzip
    importable "$dir/$run"
  done
  # Wholly frozen runs have no gradient crossing ranks, which tf-import's
  # clock check would take for clocks out of step: import those without it.
  lag=()
  [ "${FROZEN:-}" = --frozen-all ] && lag=(--p2p-ms 0)
  "$tf_import" "$dir"/unfrozen/import/rank{0,1}.json --frozen "$dir"/frozen/import/rank{0,1}.json \
    "${lag[@]}" -o "$dir/profile.json"
  "$tf_plan" "$dir/profile.json" -q -o "$dir/plan.json"
  "$py" "$here/torch_pipeline.py" --schedule "$s" "${shape[@]}" --plan "$dir/plan.json" \
    --profile "$dir/planned" --gzip
  importable "$dir/planned"
  "$tf_import" "$dir"/planned/import/rank{0,1}.json -o "$dir/planned-profile.json" 2> /dev/null
  echo "$s: traces, profile and plan in $dir"
done
