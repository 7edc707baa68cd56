#!/usr/bin/env bash
# Command-line behaviour of tf-dot: every format from a plan and a profile,
# exit codes and messages on bad input, and no partial or clobbered output.
# Needs TF_DOT and TF_PLAN (paths of the programs).
set -u
: "${TF_DOT:?path of tf-dot}" "${TF_PLAN:?path of tf-plan}"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() {
    echo "FAIL: $*" >&2
    failures=$((failures + 1))
}

# expect CODE COMMAND...: runs the command, checks its exit status.
expect() {
    local want=$1
    shift
    "$@" >"$work/out" 2>"$work/err"
    local got=$?
    if [ "$got" -ne "$want" ]; then
        fail "exit $got, want $want: $*"
        sed 's/^/  stderr: /' "$work/err" >&2
    fi
}

# magic FILE HEX: the file starts with these bytes.
magic() {
    local got
    got=$(head -c $((${#2} / 2)) "$1" | od -An -tx1 | tr -d ' \n')
    [ "$got" = "$2" ] || fail "$1 starts with $got, want $2"
}

cat >"$work/profile.json" <<'EOF'
{ "format": "tf-profile", "version": 1, "schedule": "1F1B", "ranks": 2,
  "stages_per_rank": 1, "microbatches": 4, "max_freeze_ratio": 0.8,
  "stages": [ {"forward_ms": 10, "backward_ms": 30, "backward_frozen_ms": 15},
              {"forward_ms": 12, "backward_ms": 40, "backward_frozen_ms": 18} ] }
EOF
expect 0 "$TF_PLAN" "$work/profile.json" -o "$work/plan.json" -q
plan=$work/plan.json

# Every format, by extension and by -T.
expect 0 "$TF_DOT" "$plan" -o "$work/t.svg"
# A profile may leave out "format" (docs/formats.md); tf-dot draws it too.
sed 's/"format": "tf-profile", //' "$work/profile.json" >"$work/noformat.json"
expect 0 "$TF_DOT" "$work/noformat.json" -o "$work/noformat.svg"
grep -q '</svg>' "$work/t.svg" || fail "t.svg is not a whole SVG"
expect 0 "$TF_DOT" "$plan" -o "$work/t.png"
magic "$work/t.png" 89504e470d0a1a0a
expect 0 "$TF_DOT" "$plan" -o "$work/t.pdf"
magic "$work/t.pdf" 255044462d
expect 0 "$TF_DOT" "$plan" -o "$work/t.gv"
head -c 7 "$work/t.gv" | grep -q digraph || fail "t.gv is not DOT"
expect 0 "$TF_DOT" "$plan" -o "$work/trace.json"
grep -q '"traceEvents"' "$work/trace.json" || fail "trace.json has no traceEvents"
[ "$(grep -o '"ph":"X"' "$work/trace.json" | wc -l)" -eq 16 ] || fail "trace.json: want 16 complete events"
expect 0 "$TF_DOT" "$plan" -T svg -o "$work/named.out"
grep -q '</svg>' "$work/named.out" || fail "-T svg did not write SVG"
expect 0 "$TF_DOT" "$plan" -Tpng -o "$work/named2.out"
magic "$work/named2.out" 89504e470d0a1a0a

# Default: DOT on stdout.
expect 0 "$TF_DOT" "$plan"
head -c 7 "$work/out" | grep -q digraph || fail "stdout is not DOT"
expect 0 "$TF_DOT" "$plan" -T chrome
grep -q '"traceEvents"' "$work/out" || fail "-T chrome on stdout"

# A profile is drawn as its unfrozen schedule; --compare and --dag.
expect 0 "$TF_DOT" "$work/profile.json" -o "$work/profile.svg"
grep -q 'unfrozen schedule' "$work/profile.svg" || fail "profile drawing is not titled unfrozen"
expect 0 "$TF_DOT" "$plan" --compare unfrozen -o "$work/compare.svg"
[ "$(grep -c 'class="node action ' "$work/compare.svg")" -eq 32 ] || fail "compare: want 32 boxes"
expect 0 "$TF_DOT" "$plan" --dag -o "$work/dag.svg"
grep -q 'class="edge dep' "$work/dag.svg" || fail "--dag drew no dependency edges"
expect 0 "$TF_DOT" "$plan" --width 1500 --title 'My \N title' -o "$work/wide.svg"
grep -q '<svg width="1500pt"' "$work/wide.svg" || fail "--width 1500 not honoured"
grep -q 'My \\N title' "$work/wide.svg" || fail "--title text not drawn verbatim"

# The SVG is well-formed XML (where python3 is around to say so).
if command -v python3 >/dev/null; then
    for f in t.svg compare.svg dag.svg wide.svg; do
        python3 -c 'import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1])' "$work/$f" ||
            fail "$f is not well-formed XML"
    done
fi

# Usage errors: exit 2 and say why.
expect 2 "$TF_DOT"
expect 2 "$TF_DOT" "$plan" -T gif
grep -q 'gif' "$work/err" || fail "-T gif: message does not name the format"
expect 2 "$TF_DOT" "$plan" -o "$work/t.gif"
grep -q 'extension' "$work/err" || fail "-o t.gif: message does not mention the extension"
[ -e "$work/t.gif" ] && fail "t.gif was created"
expect 2 "$TF_DOT" "$plan" --compare frozen
expect 2 "$TF_DOT" "$plan" --width -3
expect 2 "$TF_DOT" "$plan" --bogus
expect 0 "$TF_DOT" --help

# Bad input: exit 1, a message naming the problem, no output file.
echo '{"format": "tf-study", "version": 1}' >"$work/notplan.json"
expect 1 "$TF_DOT" "$work/notplan.json" -o "$work/bad1.svg"
grep -q 'format' "$work/err" || fail "not-a-plan: message does not name the field"
[ -e "$work/bad1.svg" ] && fail "bad1.svg was created"
echo 'not json at all' >"$work/garbage.json"
expect 1 "$TF_DOT" "$work/garbage.json" -o "$work/bad2.svg"
[ -e "$work/bad2.svg" ] && fail "bad2.svg was created"
expect 1 "$TF_DOT" "$work/missing.json" -o "$work/bad3.svg"
expect 1 "$TF_DOT" "$plan" -o "$work/no/such/dir/t.svg"
grep -q 'no/such/dir' "$work/err" || fail "unwritable path: message does not name it"
expect 1 "$TF_DOT" "$plan" --dag -T chrome
expect 1 "$TF_DOT" "$plan" --width 20 -o "$work/narrow.svg"
[ -e "$work/narrow.svg" ] && fail "narrow.svg was created"

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
expect 1 "$TF_DOT" "$work/overlap.json" -o "$work/keep.svg"
grep -q 'inconsistent plan' "$work/err" || fail "overlap: message does not say inconsistent plan"
cmp -s "$work/t.svg" "$work/keep.svg" || fail "a failed run changed keep.svg"
ls "$work" | grep -q 'keep.svg.' && fail "a temporary file was left beside keep.svg"

if [ "$failures" -ne 0 ]; then
    echo "$failures failure(s)" >&2
    exit 1
fi
echo "tf-dot CLI: all checks passed"
