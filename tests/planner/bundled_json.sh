#!/usr/bin/env bash
# Every JSON file in the source tree loads with the program that reads it:
# profiles with tf-plan, plans with tf-dot, studies with tf-study.  Readers
# refuse unknown fields, so a bundled file carrying a note outside "meta"
# (or a field a reader lost) fails here.  A JSON file of no known kind fails
# too, so that each new one is given its reader, or named below as a file
# no program reads.  What is made in the tree rather than shipped with it is
# left out: build folders (those holding a CMakeCache.txt) and Python venvs
# (a pyvenv.cfg: .venv-torch holds thousands of packages' JSON files).  Run
# by ctest with TF_PLAN, TF_DOT, TF_STUDY and TF_SOURCE_DIR set.
. "$(dirname "$0")/../lib.sh"
need TF_PLAN TF_DOT TF_STUDY TF_SOURCE_DIR
src=$TF_SOURCE_DIR

# Files no program of the toolkit reads, by path under the source tree.
not_inputs=(
    docs/accuracy/shifted/config.json  # the records tools/accuracy-study writes of its settings
    docs/accuracy/text/config.json
)

# kind FILE: tf-profile, tf-plan, tf-study, torch-trace (tf-import's foreign
# input, tested by cli_tf_import) or unknown.
kind() {
    python3 - "$1" <<'PY'
import json, sys
try:
    doc = json.load(open(sys.argv[1]))
except ValueError:
    print("unknown"); sys.exit()
if isinstance(doc, list) and doc and all(isinstance(e, dict) and "ph" in e for e in doc):
    print("torch-trace")     # Chrome's trace format also allows a bare event list
elif not isinstance(doc, dict):
    print("unknown")
elif doc.get("format") in ("tf-profile", "tf-plan", "tf-study"):
    print(doc["format"])
elif "traceEvents" in doc:
    print("torch-trace")
elif "stages" in doc and "format" not in doc:
    print("tf-profile")      # a profile may leave out "format" (formats.md)
else:
    print("unknown")
PY
}

# load FILE KIND: the program that reads KIND reads FILE.
load() {
    local f=$1 name=${1#"$src"/}
    case $2 in
    tf-profile) expect_status 0 "$name (tf-plan)" "$TF_PLAN" "$f" -q -o "$work/plan.json" ;;
    tf-plan) expect_status 0 "$name (tf-dot)" "$TF_DOT" "$f" -T chrome -o "$work/trace.json" ;;
    tf-study) expect_status 0 "$name (tf-study)" "$TF_STUDY" "$f" -q -j 2 -o "$work/study.csv" ;;
    torch-trace) pass ;;
    *) fail "$name: a JSON file of no known kind (give it a reader or list it in $0)" ;;
    esac
}

mapfile -t made < <(find "$src" \( -name CMakeCache.txt -o -name pyvenv.cfg \) \
    -not -path '*/.git/*' -printf '%h\n')
prune=(-name .git)
for d in "${made[@]}"; do prune+=(-o -path "$d"); done
mapfile -t files < <(find "$src" \( "${prune[@]}" \) -prune -o -name '*.json' -type f -print |
    sort)
counted=0
for f in "${files[@]}"; do
    skip=0
    for n in "${not_inputs[@]}"; do [ "$f" = "$src/$n" ] && skip=1; done
    [ $skip -eq 1 ] && continue
    load "$f" "$(kind "$f")"
    counted=$((counted + 1))
done
# The bundled inputs at the time of writing: 6 traces, 3 studies, 2 plans,
# 3 profiles (docs, fuzz regressions), 3 torch traces.
check "$counted JSON inputs found, expected at least 17" [ "$counted" -ge 17 ]

finish "bundled JSON files"
