#!/usr/bin/env bash
# Command-line behaviour of tf-dot: every format from a plan and a profile,
# exit codes and messages on bad input, and no partial or clobbered output.
# Needs TF_DOT and TF_PLAN (paths of the programs).
. "$(dirname "$0")/../lib.sh"
need TF_DOT TF_PLAN

# dot STATUS ARGS...: tf-dot ARGS must exit with STATUS (output in $work/out
# and $work/err).
dot() {
    local want=$1
    shift
    expect_status "$want" "tf-dot $*" "$TF_DOT" "$@"
}

# starts_with FILE HEX: the file starts with these bytes.
starts_with() {
    [ "$(head -c $((${#2} / 2)) "$1" | od -An -tx1 | tr -d ' \n')" = "$2" ]
}

cat >"$work/profile.json" <<'EOF'
{ "format": "tf-profile", "version": 1, "schedule": "1F1B", "ranks": 2,
  "stages_per_rank": 1, "microbatches": 4, "max_freeze_ratio": 0.8,
  "stages": [ {"forward_ms": 10, "backward_ms": 30, "backward_frozen_ms": 15},
              {"forward_ms": 12, "backward_ms": 40, "backward_frozen_ms": 18} ] }
EOF
expect_status 0 "tf-plan on the profile" "$TF_PLAN" "$work/profile.json" -o "$work/plan.json" -q
plan=$work/plan.json

# Every format, by extension and by -T.
dot 0 "$plan" -o "$work/t.svg"
# A profile may leave out "format" (docs/formats.md); tf-dot draws it too.
sed 's/"format": "tf-profile", //' "$work/profile.json" >"$work/noformat.json"
dot 0 "$work/noformat.json" -o "$work/noformat.svg"
check "t.svg is not a whole SVG" grep -q '</svg>' "$work/t.svg"
dot 0 "$plan" -o "$work/t.png"
check "t.png is not a PNG" starts_with "$work/t.png" 89504e470d0a1a0a
check "t.png: a note on stderr for 16 actions" [ ! -s "$work/err" ]
dot 0 "$plan" -o "$work/t.pdf"
check "t.pdf is not a PDF" starts_with "$work/t.pdf" 255044462d
dot 0 "$plan" -o "$work/t.gv"
check "t.gv is not DOT" bash -c 'head -c 7 "$1" | grep -q digraph' _ "$work/t.gv"
dot 0 "$plan" -o "$work/trace.json"
check "trace.json has no traceEvents" grep -q '"traceEvents"' "$work/trace.json"
check "trace.json: want 16 complete events" \
    [ "$(grep -o '"ph":"X"' "$work/trace.json" | wc -l)" -eq 16 ]
# --flows: the dependencies between ranks as flow events (arrows in Perfetto); the
# ranks' threads are named; only for the Chrome trace.
dot 0 "$plan" -T chrome --flows -o "$work/flows.json"
check "--flows: flow events" python3 - "$work/flows.json" <<'PY'
import json, sys
events = json.load(open(sys.argv[1]))["traceEvents"]
starts = [e for e in events if e["ph"] == "s"]
ends = [e for e in events if e["ph"] == "f"]
assert len(starts) == len(ends) > 0, (len(starts), len(ends))
assert sorted(e["id"] for e in starts) == sorted(e["id"] for e in ends)
threads = [e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"]
assert threads == ["stage 0", "stage 1"], threads
PY
dot 2 "$plan" --flows -o "$work/flows.svg"
expect_stderr "--flows on an SVG: refused, naming the Chrome trace" "-T chrome"
# DualPipeV: labelled as PyTorch names actions, the pairs framed.
cat >"$work/dualpipev.json" <<'JSON'
{ "schedule": "DualPipeV", "ranks": 2, "microbatches": 4,
  "stages": [ {"forward_ms": 5, "backward_ms": 10, "backward_input_ms": 5, "backward_weight_ms": 5},
              {"forward_ms": 5, "backward_ms": 10, "backward_input_ms": 5, "backward_weight_ms": 5},
              {"forward_ms": 5, "backward_ms": 10, "backward_input_ms": 5, "backward_weight_ms": 5},
              {"forward_ms": 5, "backward_ms": 10, "backward_input_ms": 5, "backward_weight_ms": 5} ] }
JSON
dot 0 "$work/dualpipev.json" -o "$work/dualpipev.svg"
check "DualPipeV: pairs framed" grep -q 'id="p_pair_0F3_3B1" class="node pair"' "$work/dualpipev.svg"
check "DualPipeV: boxes named as PyTorch names actions" grep -q '>3F0</text>' "$work/dualpipev.svg"
dot 0 "$work/dualpipev.json" -T chrome -o "$work/dualpipev-trace.json"
check "DualPipeV trace: events named 3F0" grep -q '"name":"3F0"' "$work/dualpipev-trace.json"
check "DualPipeV trace: pairs named in args" \
    grep -q '"pair":"(0F3;3B1)OVERLAP_F_B"' "$work/dualpipev-trace.json"
dot 0 "$plan" -T svg -o "$work/named.out"
check "-T svg did not write SVG" grep -q '</svg>' "$work/named.out"
dot 0 "$plan" -Tpng -o "$work/named2.out"
check "-Tpng did not write PNG" starts_with "$work/named2.out" 89504e470d0a1a0a

# 32,768 actions (1F1B, 8 ranks x 2,048 microbatches, drawn from the profile,
# so no LP to solve): the PNG is written, and stderr says it is too dense
# and names SVG and the Chrome trace as the formats for that size.
stages=
for i in 0 1 2 3 4 5 6 7; do
    stages="$stages${stages:+,}{\"forward_ms\": $((15 + i)), \"backward_ms\": $((45 + 2 * i)),
        \"backward_frozen_ms\": $((24 + i))}"
done
printf '{"schedule": "1F1B", "ranks": 8, "microbatches": 2048, "stages": [%s]}\n' "$stages" \
    >"$work/big.json"
dot 0 "$work/big.json" -o "$work/big.png"
check "big.png is not a PNG" starts_with "$work/big.png" 89504e470d0a1a0a
expect_stderr "32,768 actions as a PNG: no note" "32768 actions, 4096 on the busiest rank"
expect_stderr "32,768 actions as a PNG: no format named" "SVG"
expect_stderr "32,768 actions as a PNG: no format named" "-T chrome"

# Boxes too narrow for their labels (1F1B, 4 ranks x 64 microbatches in
# 1,200 points): the SVG is written, stderr says how many boxes lack a
# label and what to do, and at the --width it names the note is gone.
cat >"$work/m64.json" <<'EOF'
{"schedule": "1F1B", "ranks": 4, "microbatches": 64,
 "stages": [{"forward_ms": 15, "backward_ms": 45}, {"forward_ms": 14, "backward_ms": 41},
            {"forward_ms": 15, "backward_ms": 45}, {"forward_ms": 20, "backward_ms": 55}]}
EOF
dot 0 "$work/m64.json" --width 1200 -o "$work/m64.svg"
check "m64.svg is not a whole SVG" grep -q '</svg>' "$work/m64.svg"
expect_stderr "narrow boxes: no count" "of the 512 boxes are too narrow for their labels"
expect_stderr "narrow boxes: no -T chrome" "-T chrome"
wide=$(sed -n 's/.*--width \([0-9]*\),.*/\1/p' "$work/err")
check "narrow boxes: no --width suggested" [ -n "$wide" ]
dot 0 "$work/m64.json" --width "${wide:-1}" -o "$work/m64-wide.svg"
check "at the suggested --width ${wide:-?}: still a note" [ ! -s "$work/err" ]

# Options as getopt takes them: "-oFILE", "-Tsvg" (above), "--option=value".
dot 0 "$plan" -o"$work/attached.svg"
check "-oFILE did not write SVG" grep -q '</svg>' "$work/attached.svg"
dot 0 "$plan" --output="$work/equals.out" --format=svg --width=1500 --compare=unfrozen
check "--format=svg did not write SVG" grep -q '</svg>' "$work/equals.out"
check "--width=1500 not honoured" grep -q '<svg width="1500pt"' "$work/equals.out"
check "--compare=unfrozen: want 32 boxes" \
    [ "$(grep -c 'class="node action ' "$work/equals.out")" -eq 32 ]
dot 2 "$plan" --format=gif
expect_stderr "--format=gif: message does not name the format" '"gif"'

# Default: DOT on stdout.
dot 0 "$plan"
check "stdout is not DOT" bash -c 'head -c 7 "$1" | grep -q digraph' _ "$work/out"
dot 0 "$plan" -T chrome
expect_stdout "-T chrome on stdout" '"traceEvents"'

# A profile is drawn as its unfrozen schedule; --compare and --dag.
dot 0 "$work/profile.json" -o "$work/profile.svg"
check "profile drawing is not titled unfrozen" grep -q 'unfrozen schedule' "$work/profile.svg"
dot 0 "$plan" --compare unfrozen -o "$work/compare.svg"
# A profile has no plan to compare with: refused, not two identical panels.
expect_refused_with 1 "--compare on a profile" '--compare unfrozen' -- \
    "$TF_DOT" "$work/profile.json" --compare unfrozen -o "$work/profile-compare.svg"
expect_stderr "--compare on a profile: the message says the input is a profile" 'is a profile'
check "--compare on a profile: a picture was written" [ ! -e "$work/profile-compare.svg" ]
check "compare: want 32 boxes" [ "$(grep -c 'class="node action ' "$work/compare.svg")" -eq 32 ]
dot 0 "$plan" --dag -o "$work/dag.svg"
check "--dag drew no dependency edges" grep -q 'class="edge dep' "$work/dag.svg"
dot 0 "$plan" --width 1500 --title 'My \N title' -o "$work/wide.svg"
check "--width 1500 not honoured" grep -q '<svg width="1500pt"' "$work/wide.svg"
check "--title text not drawn verbatim" grep -q 'My \\N title' "$work/wide.svg"

# A title of one rank and one microbatch reads in the singular.
cat >"$work/one.json" <<'EOF'
{"schedule": "GPipe", "ranks": 1, "microbatches": 1,
 "stages": [{"forward_ms": 1, "backward_ms": 2, "backward_frozen_ms": 1}]}
EOF
dot 0 "$work/one.json" -o "$work/one.svg"
check "one rank: the title is not in the singular" \
    grep -q 'GPipe · 1 rank · 1 microbatch<' "$work/one.svg"

# The SVG is well-formed XML (where python3 is around to say so).
if command -v python3 >/dev/null; then
    for f in t.svg compare.svg dag.svg wide.svg; do
        check "$f is not well-formed XML" \
            python3 -c 'import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1])' "$work/$f"
    done
fi

# Memory: a split-backward (ZBV) profile with memory fields (two stages
# with an I's transient), planned under a limit that needs recomputation.  The Chrome trace's live-bytes counters
# match the bytes counted afresh from the plan (check_memory_trace.py); R
# actions are slices with their recompute ratio; the picture draws a memory
# lane per rank in both panels of --compare.
cat >"$work/zbv-memory.json" <<'EOF'
{ "format": "tf-profile", "version": 1, "schedule": "ZBVZeroBubble", "ranks": 2,
  "stages_per_rank": 2, "microbatches": 4, "max_freeze_ratio": 0.8,
  "stages": [
    {"forward_ms": 7, "backward_ms": 21, "backward_frozen_ms": 10, "backward_input_ms": 9,
     "backward_weight_ms": 12, "static_bytes": 4e9, "activation_bytes": 1e9,
     "activation_frozen_bytes": 6e8, "weight_grad_bytes": 5e8, "checkpoint_bytes": 1e8,
     "recompute_ms": 7},
    {"forward_ms": 8, "backward_ms": 22, "backward_frozen_ms": 11, "backward_input_ms": 10,
     "backward_weight_ms": 12, "static_bytes": 4e9, "activation_bytes": 1e9,
     "activation_frozen_bytes": 6e8, "weight_grad_bytes": 5e8, "checkpoint_bytes": 1e8,
     "backward_input_transient_bytes": 3e8, "recompute_ms": 8},
    {"forward_ms": 8, "backward_ms": 22, "backward_frozen_ms": 11, "backward_input_ms": 10,
     "backward_weight_ms": 12, "static_bytes": 4e9, "activation_bytes": 1e9,
     "activation_frozen_bytes": 6e8, "weight_grad_bytes": 5e8, "checkpoint_bytes": 1e8,
     "backward_input_transient_bytes": 3e8, "recompute_ms": 8},
    {"forward_ms": 9, "backward_ms": 25, "backward_frozen_ms": 12, "backward_input_ms": 11,
     "backward_weight_ms": 14, "static_bytes": 4e9, "activation_bytes": 1e9,
     "activation_frozen_bytes": 6e8, "weight_grad_bytes": 5e8, "checkpoint_bytes": 1e8,
     "recompute_ms": 9} ] }
EOF
expect_status 0 "tf-plan on the memory profile" "$TF_PLAN" "$work/zbv-memory.json" \
    --memory-limit 10.5GB -o "$work/zbv-memory-plan.json" -q
dot 0 "$work/zbv-memory-plan.json" -T chrome -o "$work/zbv-memory-trace.json"
if command -v python3 >/dev/null; then
    check "memory counters differ from the plan's bytes" python3 \
        "$(dirname "$0")/check_memory_trace.py" "$work/zbv-memory-plan.json" \
        "$work/zbv-memory-trace.json"
    check "no R slice with its recompute ratio" python3 - "$work/zbv-memory-trace.json" <<'PY'
import json, sys
events = json.load(open(sys.argv[1]))["traceEvents"]
r = [e for e in events if e["ph"] == "X" and e["cat"] == "R"]
assert r and all(0 < e["args"]["recompute_ratio"] <= 1 for e in r), r[:2]
PY
fi
dot 0 "$work/zbv-memory-plan.json" --compare unfrozen -o "$work/zbv-memory.svg"
check "no memory lanes in both panels" grep -q 'id="u_mem_axis_1"' "$work/zbv-memory.svg"
if command -v python3 >/dev/null; then
    check "zbv-memory.svg is not well-formed XML" \
        python3 -c 'import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1])' \
        "$work/zbv-memory.svg"
fi
check "no planned limit line" grep -q 'id="p_limit_0" class="edge limit"' "$work/zbv-memory.svg"

# Usage errors: exit 2 and say why.
dot 2
dot 2 "$plan" -T gif
expect_stderr "-T gif: message does not name the format" 'gif'
dot 2 "$plan" -o "$work/t.gif"
expect_stderr "-o t.gif: message does not mention the extension" 'extension'
check "t.gif was created" [ ! -e "$work/t.gif" ]
dot 2 "$plan" --compare frozen
dot 2 "$plan" --width -3
dot 2 "$plan" --bogus
dot 0 --help

# Bad input: exit 1, a message naming the problem, no output file.
echo '{"format": "tf-study", "version": 1}' >"$work/notplan.json"
dot 1 "$work/notplan.json" -o "$work/bad1.svg"
expect_stderr "not-a-plan: message does not name the field" 'format'
check "bad1.svg was created" [ ! -e "$work/bad1.svg" ]
echo 'not json at all' >"$work/garbage.json"
dot 1 "$work/garbage.json" -o "$work/bad2.svg"
check "bad2.svg was created" [ ! -e "$work/bad2.svg" ]
dot 1 "$work/missing.json" -o "$work/bad3.svg"
dot 1 "$plan" -o "$work/no/such/dir/t.svg"
expect_stderr "unwritable path: message does not name it" 'no/such/dir'
dot 1 "$plan" --dag -T chrome
dot 1 "$plan" --width 20 -o "$work/narrow.svg"
check "narrow.svg was created" [ ! -e "$work/narrow.svg" ]

# An inconsistent plan (two actions of rank 0 overlapping) never replaces a
# good picture.
python_edit='import json,sys; p=json.load(open(sys.argv[1])); p["actions"][1]["start_ms"]=0.0; json.dump(p,open(sys.argv[2],"w"))'
if command -v python3 >/dev/null; then
    python3 -c "$python_edit" "$plan" "$work/overlap.json"
else
    # Without python: the second action's start_ms is the second one in the file.
    awk '/"start_ms"/ && ++n == 2 { sub(/"start_ms":[^,]*/, "\"start_ms\": 0") } { print }' \
        "$plan" >"$work/overlap.json"
fi
cp "$work/t.svg" "$work/keep.svg"
expect_refused_with 1 "overlap" 'inconsistent plan' "$work/keep.svg" -- \
    "$TF_DOT" "$work/overlap.json" -o "$work/keep.svg"

# A plan with a field this reader does not know, or of a newer version,
# never replaces a good picture; "meta" holds anything.
sed '0,/"critical"/s//"critcal"/' "$plan" >"$work/typo-plan.json"
expect_refused_with 1 "misspelled plan field" \
    '$.actions[0].critcal: unknown field (did you mean critical?)' "$work/keep.svg" -- \
    "$TF_DOT" "$work/typo-plan.json" -o "$work/keep.svg"
sed 's/"version":[[:space:]]*2/"version": 3/' "$plan" >"$work/v3-plan.json"
expect_refused_with 1 "newer plan" \
    '$.version: version 3 is newer than the tf-plan version this toolkit reads (2): upgrade the toolkit' \
    "$work/keep.svg" -- "$TF_DOT" "$work/v3-plan.json" -o "$work/keep.svg"
sed 's/"version":[[:space:]]*2,/"version": 2, "meta": {"run": [1, {"critcal": null}]},/' "$plan" \
    >"$work/meta-plan.json"
dot 0 "$work/meta-plan.json" -o "$work/meta.svg"
sed 's/"stages_per_rank": 1,/"stages_per_rank": 1, "stages_per_ranks": 1,/' "$work/profile.json" \
    >"$work/typo-profile.json"
expect_refused_with 1 "misspelled profile field" \
    '$.stages_per_ranks: unknown field (did you mean stages_per_rank?)' "$work/keep.svg" -- \
    "$TF_DOT" "$work/typo-profile.json" -o "$work/keep.svg"

# The picture never replaces the plan it is drawn from, however the two
# paths are spelled; an endless input is refused at the size limit.
cp "$plan" "$work/self.json"
expect_refused_with 2 "input as output" 'the input and -o are the same file' \
    "$work/self.json" -- "$TF_DOT" "$work/self.json" -o "$work/./self.json" -T svg
expect_refused_with 1 "/dev/zero as input" '/dev/zero: larger than the 64 MiB limit' -- \
    cpu_bounded 20 "$TF_DOT" /dev/zero -o "$work/zero.svg"

finish "tf-dot CLI"
