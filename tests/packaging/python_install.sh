#!/usr/bin/env bash
# The Python module installs with pip, offline: into a fresh venv
# (python3 -m venv), `pip install --no-index tools/python` (no package index,
# no find-links, no pip configuration) builds it with the in-tree backend,
# and the installed copy, not the source tree, runs `python3 -m
# timelyfreeze_plan` and prints what the source tree's copy prints.  The
# backend's sdist installs the same way.  The build leaves the source folder
# as it was (bytecode caches aside: other tests import from it).  Run by ctest with TF_SOURCE_DIR, TF_PLAN and TF_VERSION (the
# toolkit's version, which the module's must equal).
. "$(dirname "$0")/../lib.sh"
need TF_SOURCE_DIR TF_PLAN TF_VERSION
src=$TF_SOURCE_DIR/tools/python
# Nothing may reach pip from outside the command line.
unset PYTHONPATH PIP_FIND_LINKS PIP_INDEX_URL PIP_EXTRA_INDEX_URL
export PIP_CONFIG_FILE=/dev/null PIP_DISABLE_PIP_VERSION_CHECK=1
# The backend runs from the source folder: no __pycache__ left there.
export PYTHONDONTWRITEBYTECODE=1
cd "$work" || exit 2
listing() { (cd "$src" && find . -name __pycache__ -prune -o -print | sort); }
listing > "$work/source-before"

venv=$work/venv
expect_status 0 "python3 -m venv" python3 -m venv "$venv"
py=$venv/bin/python3

expect_status 0 "a plan for the module" \
    "$TF_PLAN" "$TF_SOURCE_DIR/traces/examples/1f1b-p4-m8.profile.json" -q -o "$work/plan.json"
choices=(-m timelyfreeze_plan "$work/plan.json" --tensors "6,5,5,4" --steps 12)
expect_status 0 "the source tree's module runs" env PYTHONPATH="$src" python3 "${choices[@]}"
cp "$work/out" "$work/choices.want"
check "it prints choices" [ -s "$work/choices.want" ]

# check_installed HOW: the module installed in the venv runs from there.
check_installed() {
    local how=$1
    expect_status 0 "$how: import" "$py" -c \
        'import timelyfreeze_plan as m; print(m.__file__); print(m.__version__)'
    check "$how: imported from the venv" grep -q "^$venv/" "$work/out"
    check "$how: version $TF_VERSION" grep -qx "$TF_VERSION" "$work/out"
    expect_status 0 "$how: python3 -m timelyfreeze_plan --help" "$py" -m timelyfreeze_plan --help
    expect_stdout "$how: --help" "usage: python3 -m timelyfreeze_plan"
    expect_status 0 "$how: runs on a plan" "$py" "${choices[@]}"
    check "$how: prints what the source tree's module prints" cmp -s "$work/out" "$work/choices.want"
    expect_status 0 "$how: pip show" "$py" -m pip show timelyfreeze-plan
    expect_stdout "$how: pip knows its version" "Version: $TF_VERSION"
}

expect_status 0 "pip install --no-index tools/python" "$py" -m pip install --no-index "$src"
check_installed "pip install tools/python"
expect_status 0 "pip uninstall" "$py" -m pip uninstall -y timelyfreeze-plan
expect_status 1 "uninstalled: the import fails" "$py" -c 'import timelyfreeze_plan'

mkdir "$work/dist"
expect_status 0 "the backend builds an sdist" python3 -c \
    'import sys; sys.path.insert(0, sys.argv[1]); import timelyfreeze_build as b; print(b.build_sdist(sys.argv[2]))' \
    "$src/pep517" "$work/dist"
sdist=$work/dist/$(cat "$work/out")
check "the sdist is timelyfreeze_plan-$TF_VERSION.tar.gz" [ -f "$work/dist/timelyfreeze_plan-$TF_VERSION.tar.gz" ]
expect_status 0 "pip install --no-index the sdist" "$py" -m pip install --no-index "$sdist"
check_installed "pip install the sdist"

listing > "$work/source-after"
check "the source folder is as it was" cmp -s "$work/source-before" "$work/source-after"
finish "pip install tools/python"
