# traces.sh - sourced by the tf-import scripts after lib.sh: the committed
# fixtures (a 1F1B run of two ranks, r0 r1, and its frozen run, f0 f1) and
# the synthetic traces make_traces.py writes into $gen, so that each
# script reads the same files under the same names.
need TF_IMPORT TF_PLAN TF_SOURCE_DIR

here=$TF_SOURCE_DIR/tests/import
fx=$here/fixtures
r0=$fx/pp2-1f1b-rank0.json
r1=$fx/pp2-1f1b-rank1.json.gz
f0=$fx/pp2-1f1b-frozen-rank0.json
f1=$fx/pp2-1f1b-frozen-rank1.json
gen=$work/gen
mkdir -p "$gen"
python3 "$here/make_traces.py" "$fx" "$gen" || { fail "make_traces.py"; finish "tf-import"; }
