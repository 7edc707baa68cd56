#!/usr/bin/env bash
# Command-line tests of tf-study: exit statuses, error messages naming the
# JSON path and value, no output on failure (and good output never
# overwritten), skips on stderr, and a CSV row checked against tf-plan run
# on a hand-written profile of the same configuration.
# Needs TF_STUDY, TF_PLAN (the programs) and TF_SOURCE_DIR.
. "$(dirname "$0")/../lib.sh"
need TF_STUDY TF_PLAN TF_SOURCE_DIR

cat >"$work/good.json" <<'EOF'
{ "format": "tf-study", "version": 1, "name": "cli test",
  "model": { "layers": 8, "layer_forward_ms": 1.5, "layer_backward_ms": 3.5,
             "layer_backward_frozen_ms": 1.75, "microbatch_tokens": 4096 },
  "sweep": { "schedule": ["1F1B", "Interleaved1F1B"], "ranks": [2, 4], "microbatches": [4, 5],
             "max_freeze_ratio": [0.6], "p2p_ms": [0.1] } }
EOF

# --- a good study: CSV, SVG, summary, skips on stderr ---------------------
expect_status 0 "good study" "$TF_STUDY" "$work/good.json" -o "$work/r.csv" --plot "$work/r.svg" -j 2
check "good study: no CSV written" [ -s "$work/r.csv" ]
check "good study: no SVG written" [ -s "$work/r.svg" ]
check "good study: no markdown summary on stdout" grep -q '^# tf-study: cli test' "$work/out"
check "good study: summary has no table rows" grep -q '^| 1F1B |' "$work/out"
# PyTorch's interleaved schedule needs microbatches to be a multiple of
# max(1, microbatches / ranks): 5 on 2 ranks is refused.
expect_stderr "good study" "skipped Interleaved1F1B ranks=2 stages_per_rank=2 microbatches=5"
rows=$(($(wc -l <"$work/r.csv") - 1))
check "good study: $rows CSV rows, expected 7 (8 configurations, 1 skipped)" [ "$rows" -eq 7 ]
check "CSV header" grep -q '^schedule,ranks,stages_per_rank,' <(head -1 "$work/r.csv")
check "SVG is not complete" grep -q '</svg>' "$work/r.svg"

# --- a long study name: the plot's title fits inside the picture ---------
long_name="capacity sweep of a LLaMA-3.1-70B-like model over every schedule, depth, microbatch \
count and cap on H200"
sed "s/\"name\": \"cli test\"/\"name\": \"$long_name\"/" "$work/good.json" >"$work/long.json"
expect_status 0 "long name" "$TF_STUDY" "$work/long.json" -q --plot "$work/long.svg"
# The title's width estimated at 0.62 em a character (DejaVu Sans Bold, what
# Helvetica is on Debian, averages 0.59 em over text) must end inside the SVG.
check "long name: the title runs past the SVG's right edge" \
    python3 - "$work/long.svg" "$long_name" <<'PY'
import sys, xml.etree.ElementTree as E
ns = {"s": "http://www.w3.org/2000/svg"}
svg = E.parse(sys.argv[1]).getroot()
title = svg.find(".//s:g[@id='title']/s:text", ns)
end = float(title.get("x")) + 0.62 * float(title.get("font-size")) * len(title.text)
width = float(svg.get("width").removesuffix("pt"))
print(f"title ends at about {end:.0f}, the SVG is {width:.0f} wide")
sys.exit(0 if sys.argv[2] in title.text and end <= width else 1)
PY

# --- the chart's bars: the whole throughput bar over its solid part is the
# planned over the unfrozen throughput its tooltip gives (to a point, as
# bar ends are whole points); the speedup bar's length over its axis is
# the speedup's excess over 1 ---------------------------------------------
check "good study: bar lengths are not the figures" python3 - "$work/r.svg" <<'PY'
import re, sys, xml.etree.ElementTree as E
ns = {"s": "http://www.w3.org/2000/svg", "x": "http://www.w3.org/1999/xlink"}
svg = E.parse(sys.argv[1]).getroot()
bars = {}
for a in svg.iter("{%s}a" % ns["s"]):
    tip = a.get("{%s}title" % ns["x"]) or ""
    m = re.search(r"([0-9]+) \u2192 ([0-9]+) tokens/s per GPU, speedup ([0-9.]+)x", tip)
    poly = a.find("s:polygon", ns)
    if m and poly is not None:
        xs = [float(p.split(",")[0]) for p in poly.get("points").split()]
        bars.setdefault(tip, (m, []))[1].append((min(xs), max(xs)))
assert len(bars) == 7, len(bars)
for tip, (m, spans) in bars.items():
    unfrozen, planned = float(m.group(1)), float(m.group(2))
    solid, gain = spans[0], spans[1]
    assert abs(gain[0] - solid[1]) < 0.01, tip       # the gain starts where the solid part ends
    ratio = (gain[1] - solid[0]) / (solid[1] - solid[0])
    assert abs(ratio - planned / unfrozen) < 2 / (solid[1] - solid[0]), (tip, ratio)
print(f"{len(bars)} configurations' bars match their figures")
PY

# ImageMagick's SVG renderer outlines text that does not say stroke="none"
# (SVG's own default): every text element of the chart says it.
check "good study: a text element without stroke=\"none\"" \
    [ "$(grep -c '<text ' "$work/r.svg")" -eq "$(grep -c '<text stroke="none" ' "$work/r.svg")" ]

# --- PNG and PDF by the suffix; any other suffix refused before the sweep --
expect_status 0 "--plot .png" "$TF_STUDY" "$work/good.json" -q --plot "$work/r.png"
check "--plot .png: not a PNG" python3 -c \
    'import sys; sys.exit(open(sys.argv[1], "rb").read(8) != b"\x89PNG\r\n\x1a\n")' "$work/r.png"
expect_status 0 "--plot .pdf" "$TF_STUDY" "$work/good.json" -q --plot "$work/r.pdf"
check "--plot .pdf: not a PDF" grep -q '^%PDF-' "$work/r.pdf"
expect_refused_with 2 "--plot .jpg" "name the file .svg, .png or .pdf" -- \
    "$TF_STUDY" "$work/good.json" -q -o "$work/jpg.csv" --plot "$work/r.jpg"
check "--plot .jpg: a chart written" [ ! -e "$work/r.jpg" ]
check "--plot .jpg: a CSV written" [ ! -e "$work/jpg.csv" ]

# --- one configuration on one rank: counts in the singular ---------------
cat >"$work/one.json" <<'EOF'
{ "model": { "layers": 8, "layer_forward_ms": 1.5, "layer_backward_ms": 3.5,
             "layer_backward_frozen_ms": 1.75, "microbatch_tokens": 4096 },
  "sweep": { "schedule": ["GPipe"], "ranks": [1], "microbatches": [4] } }
EOF
expect_status 0 "one configuration" "$TF_STUDY" "$work/one.json" -j 1 --plot "$work/one.svg"
expect_stdout "one configuration: singular counts" \
    "1 configuration: 1 solved, 0 skipped, 0 failed (1 thread,"
check "one configuration: the plot's tooltip is not in the singular" \
    grep -q 'GPipe, 1 rank x 1 stage, 4 microbatches' "$work/one.svg"

# --- options as getopt takes them: "-j1", "-oFILE", "--option=value" ------
expect_status 0 "-j1" "$TF_STUDY" "$work/good.json" -q -j1 -o"$work/j1.csv"
check "-j1 -oFILE: expected 7 CSV rows" [ "$(($(wc -l <"$work/j1.csv") - 1))" -eq 7 ]
expect_status 0 "--jobs=1" "$TF_STUDY" "$work/good.json" --quiet --jobs=1 \
    --output="$work/jobs1.csv" --plot="$work/jobs1.svg" --solver=fast --objective=least-freeze
check "--output=FILE: expected 7 CSV rows" [ "$(($(wc -l <"$work/jobs1.csv") - 1))" -eq 7 ]
check "--plot=FILE: no SVG written" grep -q '</svg>' "$work/jobs1.svg"
expect_status 2 "-j0" "$TF_STUDY" "$work/good.json" -q -j0
expect_stderr "-j0" '--jobs: expected an integer in [1, 1024], got "0"'

# --- outputs are one unit: an unwritable plot leaves the CSV untouched ----
printf 'precious' >"$work/keep.csv"
expect_refused_with 1 "unwritable plot" "no/such/dir/r.svg" "$work/keep.csv" -- \
    "$TF_STUDY" "$work/good.json" -q -o "$work/keep.csv" --plot "$work/no/such/dir/r.svg"

# --- huge but finite layer times are input errors, not crashes -----------
sed 's/"layer_forward_ms": 1.5/"layer_forward_ms": 1e308/' "$work/good.json" >"$work/huge.json"
expect_status 1 "huge layer time" "$TF_STUDY" "$work/huge.json" -q -o "$work/huge.csv"
expect_stderr "huge layer time" '$.model.layer_forward_ms'
check "huge layer time: a CSV was written" [ ! -e "$work/huge.csv" ]

# rows_within_bounds CSV: on every row all_frozen <= planned <= unfrozen,
# speedup >= 1.
rows_within_bounds() {
    awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
    { u = $col["batch_ms_unfrozen"]; a = $col["batch_ms_all_frozen"]; p = $col["batch_ms_planned"]
      s = $col["speedup"]
      if (!(a <= p * (1 + 1e-9) && p <= u * (1 + 1e-9) && s >= 1 - 1e-9)) { print "row " NR ": " $0; bad = 1 } }
    END { exit bad }' "$1"
}
check "a row breaks the bounds" rows_within_bounds "$work/r.csv"

# --- a row against tf-plan on a hand-written profile ----------------------
# 1F1B, 4 ranks, 4 microbatches: 2 layers per stage.
cat >"$work/profile.json" <<'EOF'
{ "format": "tf-profile", "version": 1, "schedule": "1F1B", "ranks": 4, "microbatches": 4,
  "microbatch_tokens": 4096, "p2p_ms": 0.1, "max_freeze_ratio": 0.6,
  "stages": [ {"forward_ms": 3, "backward_ms": 7, "backward_frozen_ms": 3.5},
              {"forward_ms": 3, "backward_ms": 7, "backward_frozen_ms": 3.5},
              {"forward_ms": 3, "backward_ms": 7, "backward_frozen_ms": 3.5},
              {"forward_ms": 3, "backward_ms": 7, "backward_frozen_ms": 3.5} ] }
EOF
expect_status 0 "tf-plan on the hand-written profile" "$TF_PLAN" "$work/profile.json" -q -o "$work/plan.json"
# The first three numbers after "batch_ms" in plan.json: unfrozen, all_frozen, planned.
plan_batch=$(tr -d ' \t\n' <"$work/plan.json" | sed -n 's/.*"batch_ms":{"unfrozen":\([^,]*\),"all_frozen":\([^,]*\),"planned":\([^,}]*\)}.*/\1 \2 \3/p')
plan_speedup=$(tr -d ' \t\n' <"$work/plan.json" | sed -n 's/.*"speedup":\([^,}]*\).*/\1/p')
check "cannot read batch_ms from tf-plan's plan.json" [ -n "$plan_batch" ]
check "cannot read speedup from tf-plan's plan.json" [ -n "$plan_speedup" ]
# row_matches_plan CSV: the 1F1B ranks=4 microbatches=4 row has tf-plan's
# batch times and speedup (1e-6 relative).
row_matches_plan() {
    awk -F, -v plan="$plan_batch" -v speedup="$plan_speedup" '
    function close_to(x, y) { d = x - y; if (d < 0) d = -d; return d <= 1e-6 * (y < 0 ? -y : y) + 1e-9 }
    NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
    $col["schedule"] == "1F1B" && $col["ranks"] == 4 && $col["microbatches"] == 4 {
        found = 1; split(plan, b, " ")
        if (!close_to($col["batch_ms_unfrozen"], b[1]) || !close_to($col["batch_ms_all_frozen"], b[2]) ||
            !close_to($col["batch_ms_planned"], b[3]) || !close_to($col["speedup"], speedup)) {
            print "tf-study: " $col["batch_ms_unfrozen"] " " $col["batch_ms_all_frozen"] " " \
                  $col["batch_ms_planned"] " " $col["speedup"] "; tf-plan: " plan " " speedup; bad = 1 } }
    END { exit !found || bad }' "$1"
}
check "the 1F1B ranks=4 microbatches=4 row differs from tf-plan" row_matches_plan "$work/r.csv"

# --profiles writes each planned configuration's profile; tf-plan on it
# gives the row's planned batch time.
expect_status 0 "--profiles" "$TF_STUDY" "$work/good.json" -q --profiles "$work/profiles"
saved="$work/profiles/1F1B-p4-v1-m4-cap0.6-p2p0.1.profile.json"
check "--profiles: $saved not written" [ -s "$saved" ]
check "--profiles: expected 7 profiles" [ "$(ls "$work/profiles" | wc -l)" -eq 7 ]
expect_status 0 "tf-plan on a saved profile" "$TF_PLAN" "$saved" -q -o "$work/plan2.json"
saved_planned=$(tr -d ' \t\n' <"$work/plan2.json" | sed -n 's/.*"batch_ms":{[^}]*"planned":\([^,}]*\)}.*/\1/p')
check "--profiles: no planned batch time in tf-plan's plan of the saved profile" [ -n "$saved_planned" ]
check "--profiles: tf-plan on the saved profile gives $saved_planned, the hand-written one $plan_batch" \
    [ "$saved_planned" = "$(echo "$plan_batch" | cut -d' ' -f3)" ]

# --- invalid studies: exit 1, the path and value named, no output ---------
bad_study() { # NAME JSON EXPECTED-TEXT...
    local name=$1 json=$2
    shift 2
    printf '%s\n' "$json" >"$work/bad.json"
    rm -f "$work/bad.csv" "$work/bad.svg"
    expect_status 1 "$name" "$TF_STUDY" "$work/bad.json" -o "$work/bad.csv" --plot "$work/bad.svg"
    for text in "$@"; do expect_stderr "$name" "$text"; done
    check "$name: CSV written anyway" [ ! -e "$work/bad.csv" ]
    check "$name: SVG written anyway" [ ! -e "$work/bad.svg" ]
}
model='"model": {"layers": 4, "layer_forward_ms": 1, "layer_backward_ms": 2, "microbatch_tokens": 8}'
bad_study "unknown schedule" "{$model, \"sweep\": {\"schedule\": [\"1F1B\", \"Fast\"], \"ranks\": 2, \"microbatches\": 4}}" \
    '$.sweep.schedule[1]' '"Fast"' 'unknown schedule'
bad_study "empty sweep" "{$model, \"sweep\": {\"schedule\": \"1F1B\", \"ranks\": [], \"microbatches\": 4}}" \
    '$.sweep.ranks' 'at least one value'
bad_study "negative time" '{"model": {"layers": 4, "layer_forward_ms": 1, "layer_backward_ms": -2, "microbatch_tokens": 8}, "sweep": {"schedule": "1F1B", "ranks": 2, "microbatches": 4}}' \
    '$.model.layer_backward_ms' 'got -2'
bad_study "wrong type" "{$model, \"sweep\": {\"schedule\": \"1F1B\", \"ranks\": \"two\", \"microbatches\": 4}}" \
    '$.sweep.ranks' 'got "two"'
bad_study "not JSON" '{"model": ' 'not valid JSON'
bad_study "nothing can run" "{$model, \"sweep\": {\"schedule\": \"1F1B\", \"ranks\": 8, \"microbatches\": 8}}" \
    'skipped 1F1B ranks=8' 'no configuration of the sweep can run'

# A misspelled field: refused by name, not swept with the default cap alone
# (24 configurations of the example's 48).
sed 's/"max_freeze_ratio"/"max_freeze_ratios"/' "$TF_SOURCE_DIR/tools/examples/llama8b-h200.json" \
    >"$work/typo.json"
printf 'keep' >"$work/keep-typo.csv"
expect_refused_with 1 "misspelled sweep field" \
    "typo.json: \$.sweep.max_freeze_ratios: unknown field (did you mean max_freeze_ratio?)" \
    "$work/keep-typo.csv" -- "$TF_STUDY" "$work/typo.json" -q -o "$work/keep-typo.csv"
bad_study "misspelled model field" \
    '{"model": {"layers": 4, "layer_forward_ms": 1, "layer_backwrd_ms": 2, "microbatch_tokens": 8}, "sweep": {"schedule": "1F1B", "ranks": 2, "microbatches": 4}}' \
    '$.model.layer_backwrd_ms: unknown field (did you mean layer_backward_ms?)'
bad_study "newer version" "{\"version\": 2, $model, \"sweep\": {\"schedule\": \"1F1B\", \"ranks\": 2, \"microbatches\": 4}}" \
    '$.version: version 2 is newer than the tf-study version this toolkit reads (1)'

repeats='"p2p_ms": [1, 2, 3, 2, 1]'
bad_study "the first repeat in list order" \
    "{$model, \"sweep\": {\"schedule\": \"1F1B\", \"ranks\": 2, \"microbatches\": 4, $repeats}}" \
    '$.sweep.p2p_ms[3]: repeats the value of p2p_ms[1], got 2'

# --- sizes: caps apply before any work, in bounded time -------------------
# (Pairwise repeat checks took 17 s for 2e5 entries and over a minute for
# 1e6, before the configuration cap was even looked at.)
quick_bad_study() { # NAME FILE EXPECTED-TEXT
    rm -f "$work/bad.csv"
    expect_refused_with 1 "$1" "$3" -- cpu_bounded 20 "$TF_STUDY" "$2" -q -o "$work/bad.csv"
    check "$1: CSV written anyway" [ ! -e "$work/bad.csv" ]
}
quick_bad_study "/dev/zero as study" /dev/zero '/dev/zero: larger than the 16 MiB limit'
python3 - "$work/million.json" "$work/repeat.json" <<'PY'
import json, sys
model = {"layers": 4, "layer_forward_ms": 1, "layer_backward_ms": 2, "microbatch_tokens": 8}
def study(p2p):
    return {"model": model, "sweep": {"schedule": "1F1B", "ranks": 2, "microbatches": 4,
                                      "p2p_ms": p2p}}
json.dump(study([i * 1e-3 for i in range(1000000)]), open(sys.argv[1], "w"))
json.dump(study([i * 1e-3 for i in range(99999)] + [0.0]), open(sys.argv[2], "w"))
PY
quick_bad_study "a million-entry list" "$work/million.json" \
    '$.sweep: 1000000 configurations, at most 100000 are allowed'
quick_bad_study "a repeat at the end of 1e5 values" "$work/repeat.json" \
    '$.sweep.p2p_ms[99999]: repeats the value of p2p_ms[0]'

# A summary that cannot be written (a full disk) is an error.
if [ -w /dev/full ]; then
    run bash -c '"$1" "$2" -j 2 >/dev/full' _ "$TF_STUDY" "$work/good.json"
    check "summary to /dev/full: exit 1" [ "$rc" -eq 1 ]
    expect_stderr "summary to /dev/full" "cannot write the summary to stdout"
fi

# A failed run never replaces good output.
cp "$work/r.csv" "$work/keep.csv"
printf '{"model": 1}\n' >"$work/bad.json"
expect_status 1 "bad study over existing output" "$TF_STUDY" "$work/bad.json" -o "$work/keep.csv"
check "a failed run changed the existing CSV" cmp -s "$work/r.csv" "$work/keep.csv"

# --- --solver is passed through: lp_solve and fast plan every row alike ---
expect_status 0 "--solver lp_solve" "$TF_STUDY" "$work/good.json" -q -o "$work/lp.csv" --solver lp_solve
expect_status 0 "--solver fast" "$TF_STUDY" "$work/good.json" -q -o "$work/fast.csv" --solver fast
# same_plans A.csv B.csv: same rows, same planned batch time (1e-9
# relative; the CSV keeps enough digits).
same_plans() {
    paste -d, "$1" "$2" | awk -F, '
    NR == 1 { half = NF / 2; for (i = 1; i <= half; i++) col[$i] = i; next }
    { p = $col["batch_ms_planned"]; q = $(half + col["batch_ms_planned"]); d = p - q
      if (d < 0) d = -d
      if ($1 != $(half + 1) || d > 1e-9 * p) { print "row " NR ": " p " vs " q; bad = 1 } }
    END { exit bad }'
}
check "--solver lp_solve and fast plan differently" same_plans "$work/lp.csv" "$work/fast.csv"
check "--solver: row counts differ" [ "$(wc -l <"$work/lp.csv")" -eq "$(wc -l <"$work/fast.csv")" ]
printf 'precious' >"$work/keep.csv"
# An output must not replace the study, the other output or a profile it
# reads; each is refused before anything is written.
cp "$work/good.json" "$work/keep-study.json"
expect_refused_with 2 "-o over the study" "-o and the study are the same file" \
    "$work/keep-study.json" -- "$TF_STUDY" "$work/keep-study.json" -q -o "$work/./keep-study.json"
expect_refused_with 2 "-o and --plot one file" "-o and --plot are the same file" -- \
    "$TF_STUDY" "$work/good.json" -q -o "$work/both.out" --plot "$work/both.out"
check "-o and --plot one file: nothing written" [ ! -e "$work/both.out" ]
mkdir -p "$work/prof"
name=1F1B-p2-v1-m4-cap0.6-p2p0.1.profile.json
printf 'precious' >"$work/prof/$name"
expect_refused "a profile over -o" "--profiles: the profile $work/prof/$name would replace" \
    "$work/prof/$name" -- "$TF_STUDY" "$work/good.json" -q -o "$work/prof/$name" \
    --profiles "$work/prof"
expect_status 0 "-o and --plot both on /dev/null" "$TF_STUDY" "$work/good.json" -q \
    -o /dev/null --plot /dev/null

expect_refused_with 2 "bad --solver" '--solver: expected auto, lp_solve, clp or fast, got "bogus"' \
    "$work/keep.csv" -- "$TF_STUDY" "$work/good.json" -q -o "$work/keep.csv" --solver bogus

# --- memory: the bundled LLaMA-3.1-8B study on 80 GiB GPUs ----------------
# GPipe on 4 ranks keeps all 32 microbatches' activations (8 layers of about
# 1.06 GiB each) on rank 0: it cannot fit, while 1F1B keeps 4 and fits.
expect_status 0 "--gpu-memory" "$TF_STUDY" "$TF_SOURCE_DIR/tools/examples/llama8b-h200.json" \
    --gpu-memory 80GiB -o "$work/mem.csv" --plot "$work/mem.svg" -j 2
check "memory chart: no peak memory panel" grep -q 'peak memory per GPU (GiB)' "$work/mem.svg"
check "memory chart: the fastest that fits is not named once" \
    [ "$(grep -c 'fastest that fits' "$work/mem.svg")" -eq 1 ]
check "memory chart: GPipe 4 ranks 32 microbatches cap 0.8 is not shown as not fitting" \
    grep -q 'GPipe, 4 ranks x 1 stage, 32 microbatches, cap 0.8, [^"]*(does not fit)' "$work/mem.svg"
check "memory CSV header" grep -q ',recompute,sequence_parallel,peak_memory_gib,peak_activation_gib,fits,fit_by$' \
    <(head -1 "$work/mem.csv")
check "memory: GPipe 4 ranks 32 microbatches is not marked as not fitting" \
    grep -q '^GPipe,4,1,4,8,8,32,0.8,.*,false,$' "$work/mem.csv"
check "memory: 1F1B 4 ranks 32 microbatches is not marked as fitting" \
    grep -q '^1F1B,4,1,4,8,8,32,0.8,.*,true,none$' "$work/mem.csv"
check "memory: a row that fits has a peak above 80 GiB, or one that does not fit one below" \
    python3 - "$work/mem.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
bad = [r for r in rows if (r["fits"] == "true") != (float(r["peak_memory_gib"]) <= 80 + 1e-9)]
sys.exit(1 if bad or not rows else 0)
PY
expect_stdout "memory: the summary names no fastest fitting configuration" \
    'Fastest that fits (tokens/s per GPU): ZBVZeroBubble, 4 ranks x 2, 32 microbatches'
expect_refused_with 1 "--gpu-memory without bytes" "--gpu-memory: $work/good.json: the model has no bytes" \
    -- "$TF_STUDY" "$work/good.json" -q --gpu-memory 80GiB
expect_refused_with 2 "bad --gpu-memory" "--gpu-memory" \
    -- "$TF_STUDY" "$work/good.json" -q --gpu-memory 80XB

# Bad memory fields name the field and the value.
shape='"hidden": 1024, "heads": 16, "sequence_length": 2048, "microbatch_size": 1'
bad_memory() {
    local what=$1 model=$2 top=$3 needle=$4
    printf '{ %s "model": { "layers": 8, "layer_forward_ms": 1, "layer_backward_ms": 2, %s },\n  "sweep": { "schedule": "1F1B", "ranks": 2, "microbatches": 4 } }\n' \
        "$top" "$model" >"$work/badmem.json"
    expect_refused_with 1 "$what" "$needle" -- "$TF_STUDY" "$work/badmem.json" -q
}
bad_memory "recompute" "$shape, \"recompute\": \"most\"" "" \
    '$.model.recompute: expected "none", "selective", "full" or "auto", got "most"'
bad_memory "recompute repeated" "$shape, \"recompute\": [\"none\", \"none\"]" "" \
    '$.model.recompute[1]: repeats the value of recompute[0], got "none"'
bad_memory "kv_heads" "$shape, \"kv_heads\": 32" "" '$.model.kv_heads'
bad_memory "heads missing" '"hidden": 1024, "sequence_length": 2048, "microbatch_size": 1' "" \
    '$.model.heads'
bad_memory "shape field without hidden" '"heads": 16' "" \
    '$.model.heads: a shape field needs the model'"'"'s shape'
bad_memory "sequence_parallel" "$shape, \"sequence_parallel\": \"yes\"" "" \
    '$.model.sequence_parallel: expected true or false, got "yes"'
bad_memory "distributed optimizer and bytes" \
    "$shape, \"distributed_optimizer\": true, \"bytes_per_parameter\": 16" "" \
    '$.model.bytes_per_parameter: give bytes_per_parameter or distributed_optimizer, not both'
bad_memory "gpu memory without bytes" '"microbatch_tokens": 10' '"gpu_memory_bytes": 8e10,' \
    '$.gpu_memory_bytes: a memory limit needs the model'"'"'s bytes'
bad_memory "headroom" "$shape" '"gpu_memory_bytes": 8e10, "memory_headroom_bytes": 9e10,' \
    '$.memory_headroom_bytes: the headroom must be less than gpu_memory_bytes'
bad_memory "gpu memory negative" "$shape" '"gpu_memory_bytes": -1,' '$.gpu_memory_bytes'

# --- measured bytes per layer ---------------------------------------------
# 4 layers on 1F1B's 2 ranks, 2 layers a stage, no freezing.  Per layer:
# A = 1e9, A_f = 0.6e9, G = 0.8e9, C = 0.2e9, static 3e9; the first stage
# adds 1e9 static and 0.5e9 activation, the last 2e9 and 4e9 (activations
# at the ends are kept through freezing and recomputation).  So stage 0:
# static 7e9, A 2.5e9, A_f 1.7e9, G 1.6e9, C 0.9e9; stage 1: 8e9, 6e9,
# 5.2e9, 1.6e9, 4.4e9.  Rank r keeps min(P - r, M) microbatches: rank 0
# peaks at 7e9 + 2 x 2.5e9 = 12e9, rank 1 at 8e9 + 1 x 6e9 = 14e9.
measured='"activation_bytes_per_layer": 1e9, "activation_frozen_bytes_per_layer": 6e8,
  "weight_grad_bytes_per_layer": 8e8, "checkpoint_bytes_per_layer": 2e8,
  "static_bytes_per_layer": 3e9,
  "first_stage_extra_bytes": { "static_bytes": 1e9, "activation_bytes": 5e8 },
  "last_stage_extra_bytes": { "static_bytes": 2e9, "activation_bytes": 4e9 }'
measured_study() {
    printf '{ %s "model": { "layers": 4, "layer_forward_ms": 1, "layer_backward_ms": 2,\n  "microbatch_tokens": 1024, %s },\n  "sweep": { "schedule": "1F1B", "ranks": 2, "microbatches": 4, "max_freeze_ratio": 0 } }\n' \
        "$1" "$2" >"$3"
}
measured_study "" "$measured" "$work/measured.json"
expect_status 0 "measured bytes" "$TF_STUDY" "$work/measured.json" -q -o "$work/measured.csv" \
    --profiles "$work/measured-profiles"
check "measured bytes: a stage's profile bytes are not the per-layer values x 2 layers + the ends" \
    python3 - "$work/measured-profiles/1F1B-p2-v1-m4-cap0-p2p0-none-sp0.profile.json" <<'PY'
import json, sys
stages = json.load(open(sys.argv[1]))["stages"]
want = [dict(static_bytes=7e9, activation_bytes=2.5e9, activation_frozen_bytes=1.7e9,
             weight_grad_bytes=1.6e9),
        dict(static_bytes=8e9, activation_bytes=6e9, activation_frozen_bytes=5.2e9,
             weight_grad_bytes=1.6e9)]
for k, w in enumerate(want):
    for key, value in w.items():
        got = stages[k].get(key, 0)
        if abs(got - value) > 1:
            sys.exit(f"stage {k} {key}: {got}, expected {value}")
PY
# The layers' activations alone peak on rank 0: 2 microbatches x 2e9.
check "measured bytes: the peak is not rank 1's 14e9 bytes, the layers' not rank 0's 4e9" \
    python3 - "$work/measured.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
bytes_of = lambda key: float(rows[0][key]) * 2**30   # the CSV's GiB to 10 digits
sys.exit(0 if len(rows) == 1 and abs(bytes_of("peak_memory_gib") / 14e9 - 1) < 1e-9
         and abs(bytes_of("peak_activation_gib") / 4e9 - 1) < 1e-9 else 1)
PY
# The limit at the peak fits, a byte below it does not (nothing can be
# frozen or recomputed to make room).
expect_status 0 "measured bytes at the limit" "$TF_STUDY" "$work/measured.json" -q \
    -o "$work/fit.csv" --gpu-memory 14000000000
check "measured bytes: a 14e9-byte GPU does not fit the 14e9-byte peak" \
    grep -q ',true,none$' <(tail -1 "$work/fit.csv")
expect_status 0 "measured bytes below the limit" "$TF_STUDY" "$work/measured.json" -q \
    -o "$work/nofit.csv" --gpu-memory 13999999999
check "measured bytes: a GPU a byte below the 14e9-byte peak fits it" \
    grep -q ',false,$' <(tail -1 "$work/nofit.csv")
# Without static_bytes_per_layer, layer_parameters x bytes_per_parameter:
# 2 layers x 1e8 x 16 bytes, and the ends' static bytes, on each stage.
measured_study "" '"activation_bytes_per_layer": 1e9, "layer_parameters": 1e8,
  "bytes_per_parameter": 16, "last_stage_extra_bytes": { "static_bytes": 2e9 }' \
    "$work/per-parameter.json"
expect_status 0 "measured bytes per parameter" "$TF_STUDY" "$work/per-parameter.json" -q \
    --profiles "$work/per-parameter"
check "measured bytes: static bytes are not parameters x bytes_per_parameter" \
    python3 - "$work/per-parameter/1F1B-p2-v1-m4-cap0-p2p0-none-sp0.profile.json" <<'PY'
import json, sys
stages = json.load(open(sys.argv[1]))["stages"]
sys.exit(0 if [s["static_bytes"] for s in stages] == [3.2e9, 5.2e9] else 1)
PY

# Each bad measured value is refused, naming the field and the value.
bad_measured() {
    measured_study "" "$2" "$work/badmeasured.json"
    expect_refused_with 1 "$1" "$3" -- "$TF_STUDY" "$work/badmeasured.json" -q
}
bad_measured "measured negative" '"activation_bytes_per_layer": -1, "static_bytes_per_layer": 0' \
    '$.model.activation_bytes_per_layer: expected a finite number in [0, 1.15292e+18], got -1'
bad_measured "measured string" '"activation_bytes_per_layer": "1GB", "static_bytes_per_layer": 0' \
    '$.model.activation_bytes_per_layer: expected a finite number in [0, 1.15292e+18], got "1GB"'
bad_measured "frozen above full" \
    '"activation_bytes_per_layer": 1e9, "activation_frozen_bytes_per_layer": 2e9, "static_bytes_per_layer": 0' \
    '$.model.activation_frozen_bytes_per_layer: frozen bytes must not exceed activation_bytes_per_layer, got 2000000000'
bad_measured "checkpoint above full" \
    '"activation_bytes_per_layer": 1e9, "checkpoint_bytes_per_layer": 2e9, "static_bytes_per_layer": 0' \
    '$.model.checkpoint_bytes_per_layer: a checkpoint must not exceed activation_bytes_per_layer'
bad_measured "weight grad negative" \
    '"activation_bytes_per_layer": 1e9, "weight_grad_bytes_per_layer": -5, "static_bytes_per_layer": 0' \
    '$.model.weight_grad_bytes_per_layer: expected a finite number'
bad_measured "static negative" '"activation_bytes_per_layer": 1e9, "static_bytes_per_layer": -1' \
    '$.model.static_bytes_per_layer: expected a finite number'
bad_measured "no static bytes" '"activation_bytes_per_layer": 1e9' \
    '$.model.static_bytes_per_layer: expected the static bytes per layer (or layer_parameters'
bad_measured "static both ways" \
    '"activation_bytes_per_layer": 1e9, "static_bytes_per_layer": 1, "bytes_per_parameter": 16' \
    '$.model.bytes_per_parameter: give static_bytes_per_layer or bytes per parameter, not both'
bad_measured "extra negative" \
    '"activation_bytes_per_layer": 1e9, "static_bytes_per_layer": 0, "first_stage_extra_bytes": { "activation_bytes": -2 }' \
    '$.model.first_stage_extra_bytes.activation_bytes: expected a finite number'
bad_measured "extra unknown field" \
    '"activation_bytes_per_layer": 1e9, "static_bytes_per_layer": 0, "last_stage_extra_bytes": { "logits": 2 }' \
    '$.model.last_stage_extra_bytes'
bad_measured "extra not an object" \
    '"activation_bytes_per_layer": 1e9, "static_bytes_per_layer": 0, "last_stage_extra_bytes": 2' \
    '$.model.last_stage_extra_bytes'
bad_measured "measured field without activation" '"static_bytes_per_layer": 1e9' \
    '$.model.static_bytes_per_layer: a measured byte field needs activation_bytes_per_layer'
bad_measured "measured and shape" "$shape, \"activation_bytes_per_layer\": 1e9" \
    '$.model.activation_bytes_per_layer: one source of bytes: give the model'"'"'s shape (hidden'
bad_measured "shape field with measured" \
    '"activation_bytes_per_layer": 1e9, "static_bytes_per_layer": 0, "sequence_parallel": true' \
    '$.model.sequence_parallel: one source of bytes'
bad_measured "selective with measured" \
    '"activation_bytes_per_layer": 1e9, "static_bytes_per_layer": 0, "recompute": "selective"' \
    '$.model.recompute: "selective" needs the model'"'"'s shape'
bad_measured "full without a checkpoint" \
    '"activation_bytes_per_layer": 1e9, "static_bytes_per_layer": 0, "recompute": ["none", "full"]' \
    '$.model.checkpoint_bytes_per_layer: expected the bytes a recomputed layer keeps'
bad_measured "recompute without bytes" '"recompute": "auto"' \
    '$.model.recompute: needs the model'"'"'s bytes'

# The model's recompute and sequence_parallel lists count toward the sweep's
# size limit: 8 of them x 12501 microbatch counts is over 100,000.
python3 -c 'import json; print(json.dumps({"model": {"layers": 8, "layer_forward_ms": 1,
    "layer_backward_ms": 2, "hidden": 1024, "heads": 16, "sequence_length": 2048,
    "microbatch_size": 1, "recompute": ["none", "selective", "full", "auto"],
    "sequence_parallel": [False, True]},
    "sweep": {"schedule": "1F1B", "ranks": 2, "microbatches": [1] * 12501}}))' >"$work/big.json"
expect_refused_with 1 "memory sweep size" '$.sweep: 100008 configurations, at most 100000' \
    -- "$TF_STUDY" "$work/big.json" -q

# --- usage ---------------------------------------------------------------
expect_status 2 "no arguments" "$TF_STUDY"
expect_status 2 "bad --jobs" "$TF_STUDY" "$work/good.json" -j 0
expect_status 2 "unknown option" "$TF_STUDY" "$work/good.json" --frobnicate
expect_status 0 "--help" "$TF_STUDY" --help
expect_stdout "--help prints no usage" 'usage: tf-study'
expect_status 1 "missing file" "$TF_STUDY" "$work/does-not-exist.json"

# The bundled issue example parses and its first configurations solve
# (quiet, no output files: just the exit status of a cut-down sweep).
sed 's/"ranks": \[2, 4, 8\]/"ranks": [2]/; s/"microbatches": \[8, 16, 32\]/"microbatches": [8]/' \
    "$TF_SOURCE_DIR/tools/examples/issue-example.json" >"$work/issue-small.json"
expect_status 0 "issue example (cut down)" "$TF_STUDY" "$work/issue-small.json" -q -o "$work/issue.csv"
check "issue example: expected 8 rows" [ "$(($(wc -l <"$work/issue.csv") - 1))" -eq 8 ]

finish "tf-study CLI"
