#!/usr/bin/env bash
# The installed package: `cmake --install` of this build into an empty
# prefix gives the five programs, the libraries, tf/ and tfx/ headers and
# the pkg-config files; the installed tf-plan runs; small programs build
# against the installed libraries with pkg-config alone and agree with
# the programs.  Run by ctest with TF_BUILD_DIR, TF_SOURCE_DIR, TF_TESTS_DIR
# and TF_TEST_CFLAGS (the sanitizer flags of this build, if any).
. "$(dirname "$0")/../lib.sh"
need TF_BUILD_DIR TF_SOURCE_DIR TF_TESTS_DIR
prefix=$work/prefix
expect_status 0 "cmake --install into an empty prefix" \
    cmake --install "$TF_BUILD_DIR" --prefix "$prefix"
for program in tf-plan tf-dot tf-study tf-exec tf-import; do
    check "bin/$program installed" [ -x "$prefix/bin/$program" ]
done
libdir=$(dirname "$(find "$prefix" -name timelyfreeze.pc)")/..
for lib in tfplanner tfrender tfexec tfexec_cuda tfexec_core; do
    check "lib$lib.a installed" [ -f "$libdir/lib$lib.a" ]
done
check "include/tf/plan.h installed" [ -f "$prefix/include/tf/plan.h" ]
check "include/tfx/runtime.h installed" [ -f "$prefix/include/tfx/runtime.h" ]
check "the licence installed" [ -f "$prefix/share/doc/timelyfreeze/LICENSE" ]

# The installed programs run from the prefix.
profile=$TF_SOURCE_DIR/traces/examples/1f1b-p4-m8.profile.json
expect_status 0 "installed tf-plan" "$prefix/bin/tf-plan" "$profile" -o "$work/plan.json" -q
expect_status 0 "installed tf-exec --version" "$prefix/bin/tf-exec" --version

# Programs built with pkg-config against the installed package.
export PKG_CONFIG_PATH=$libdir/pkgconfig
read -r -a flags <<<"${TF_TEST_CFLAGS:-}"
build() { # OUT SOURCE PACKAGE...
    local out=$1 src=$2
    shift 2
    # shellcheck disable=SC2046
    cc -std=c11 "${flags[@]}" -o "$out" "$src" $(pkg-config --static --cflags --libs "$@")
}
expect_status 0 "a planner program builds with pkg-config" \
    build "$work/plan_batch_time" "$TF_TESTS_DIR/packaging/plan_batch_time.c" timelyfreeze
expect_status 0 "it runs" "$work/plan_batch_time" "$profile"
mine=$(cat "$work/out")
theirs=$(python3 -c 'import json,sys; print("%.6f" % json.load(open(sys.argv[1]))["batch_ms"]["planned"])' \
    "$work/plan.json")
check "its planned batch time $mine equals tf-plan's $theirs" [ "$mine" = "$theirs" ]
expect_status 0 "an executor program builds with pkg-config" \
    build "$work/model_parameters" "$TF_TESTS_DIR/packaging/model_parameters.c" timelyfreeze-exec
expect_status 0 "it runs" "$work/model_parameters"
params=$(cat "$work/out")
expect_status 0 "tf-exec describes the same model" "$prefix/bin/tf-exec" --steps 1 --progress lines
expect_stdout "tf-exec's model has $params parameters" "$params parameters"
finish "installed package"
