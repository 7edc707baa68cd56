#!/usr/bin/env bash
# The installed package: `cmake --install` of this build into an empty
# prefix gives the five programs, each library shared (with its SONAME and
# links) and static, tf/ and tfx/ headers and the pkg-config files; the
# installed programs run; small programs build against the installed
# libraries with the plain pkg-config line (shared libraries, found through
# the run path the .pc files add, no LD_LIBRARY_PATH) and with --static
# (the archives alone), and agree with the programs.  Run by ctest with
# TF_BUILD_DIR, TF_SOURCE_DIR, TF_TESTS_DIR, TF_SOVERSION, TF_TEST_CC (this
# build's compiler; cc without it) and TF_TEST_CFLAGS (the sanitizer flags
# of this build, if any).
. "$(dirname "$0")/../lib.sh"
need TF_BUILD_DIR TF_SOURCE_DIR TF_TESTS_DIR TF_SOVERSION
unset LD_LIBRARY_PATH
prefix=$work/prefix
expect_status 0 "cmake --install into an empty prefix" \
    cmake --install "$TF_BUILD_DIR" --prefix "$prefix"
for program in tf-plan tf-dot tf-study tf-exec tf-import; do
    check "bin/$program installed" [ -x "$prefix/bin/$program" ]
done
pcdir=$(dirname "$(find "$prefix" -name timelyfreeze.pc)")
libdir=$(cd "$pcdir/.." && pwd)
libraries=(tfplanner tfrender tfexec tfexec_cuda tfexec_core)

# soname FILE: the SONAME a shared library declares.
soname() { readelf -d "$1" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p'; }
for lib in "${libraries[@]}"; do
    so=$libdir/lib$lib.so.$TF_SOVERSION
    check "lib$lib.a installed" [ -f "$libdir/lib$lib.a" ]
    check "lib$lib.so.$TF_SOVERSION installed" [ -f "$so" ]
    check "its SONAME is lib$lib.so.$TF_SOVERSION" [ "$(soname "$so")" = "lib$lib.so.$TF_SOVERSION" ]
    check "lib$lib.so leads to it" [ "$(readlink -f "$libdir/lib$lib.so")" = "$(readlink -f "$so")" ]
done
check "include/tf/plan.h installed" [ -f "$prefix/include/tf/plan.h" ]
check "include/tfx/runtime.h installed" [ -f "$prefix/include/tfx/runtime.h" ]
check "the licence installed" [ -f "$prefix/share/doc/timelyfreeze/LICENSE" ]

# The installed programs run from the prefix.
profile=$TF_SOURCE_DIR/traces/examples/1f1b-p4-m8.profile.json
expect_status 0 "installed tf-plan" "$prefix/bin/tf-plan" "$profile" -o "$work/plan.json" -q
expect_status 0 "installed tf-dot" "$prefix/bin/tf-dot" "$work/plan.json" -o "$work/tf-dot.svg"
expect_status 0 "installed tf-exec --version" "$prefix/bin/tf-exec" --version
expect_status 0 "tf-exec describes its default model in a one-step run" \
    "$prefix/bin/tf-exec" --steps 1 --progress lines
tf_exec_model=$(cat "$work/out")
planned=$(python3 -c 'import json,sys; print("%.6f" % json.load(open(sys.argv[1]))["batch_ms"]["planned"])' \
    "$work/plan.json")

# A view of the prefix with the archives and no shared library, so that a
# --static link there can only take the archives and must get everything
# they need from the .pc files.
static=$work/static
static_libdir=$static/${libdir#"$prefix"/}
mkdir -p "$static_libdir"
cp -r "$pcdir" "$static_libdir/"
ln -s "$prefix/include" "$static/include"
for lib in "${libraries[@]}"; do
    ln -s "$libdir/lib$lib.a" "$static_libdir/lib$lib.a"
done

read -r -a flags <<<"${TF_TEST_CFLAGS:-}"
# build OUT SOURCE PKG_CONFIG_PATH PKG-CONFIG-OPTION... PACKAGE: the
# program a user builds with `cc SOURCE $(pkg-config ... PACKAGE)`.
build() {
    local out=$1 src=$2 pc_path=$3
    shift 3
    # shellcheck disable=SC2046
    "${TF_TEST_CC:-cc}" -std=c11 "${flags[@]}" -o "$out" "$src" \
        $(PKG_CONFIG_PATH=$pc_path pkg-config "$@")
}
# needs_tf BINARY: the libtf*.so files BINARY names (readelf's NEEDED), one a line.
needs_tf() { readelf -d "$1" | sed -n 's/.*Shared library: \[\(libtf[^]]*\)\]/\1/p'; }
# resolved_outside BINARY: the libtf* libraries the loader takes from
# elsewhere than the prefix (empty when all come from it).
resolved_outside() { ldd "$1" | grep '^\s*libtf' | grep -v "=> $libdir/" || true; }

# names_all BINARY SONAME...: BINARY names each SONAME (a linker that
# drops unused libraries may leave out the others of the Libs line).
names_all() {
    local bin=$1 lib
    shift
    for lib in "$@"; do needs_tf "$bin" | grep -qx "$lib" || return 1; done
}

# check_program NAME PACKAGE SONAMES ARGS...: builds tests/packaging/NAME.c
# with the plain line and with --static and runs both with ARGS; each must
# print the same as the installed programs ($work/NAME.want).  The plain one
# must name the shared libraries SONAMES (those whose functions it calls)
# and load every libtf one from the prefix; the static one must name none.
check_program() {
    local name=$1 package=$2 sonames=$3
    shift 3
    local src=$TF_TESTS_DIR/packaging/$name.c bin=$work/$name
    expect_status 0 "$name builds with the plain pkg-config line" \
        build "$bin" "$src" "$pcdir" --cflags --libs "$package"
    # shellcheck disable=SC2086
    check "$name names $sonames, not only '$(needs_tf "$bin" | xargs)'" names_all "$bin" $sonames
    check "$name loads them from the prefix, not $(resolved_outside "$bin")" \
        [ -z "$(resolved_outside "$bin")" ]
    expect_status 0 "$name runs" "$bin" "$@"
    check "$name prints what the installed programs print" cmp -s "$work/out" "$work/$name.want"
    expect_status 0 "$name builds with pkg-config --static against the archives" \
        build "$bin-static" "$src" "$static_libdir/pkgconfig" --static --cflags --libs "$package"
    check "$name (static) names no libtf shared library" [ -z "$(needs_tf "$bin-static")" ]
    expect_status 0 "$name (static) runs" "$bin-static" "$@"
    check "$name (static) prints what the installed programs print" \
        cmp -s "$work/out" "$work/$name.want"
}
# so LIB...: their SONAMEs, space-separated.
so() { local lib; for lib in "$@"; do printf 'lib%s.so.%s ' "$lib" "$TF_SOVERSION"; done; }

echo "$planned" > "$work/plan_batch_time.want"
check_program plan_batch_time timelyfreeze "$(so tfplanner)" "$profile"
cp "$work/tf-dot.svg" "$work/plan_timeline.want"
check_program plan_timeline timelyfreeze-render "$(so tfrender tfplanner)" "$work/plan.json"
sed -n 's/.* \([0-9][0-9]*\) parameters.*/\1/p' <<<"$tf_exec_model" > "$work/model_parameters.want"
check "tf-exec states its parameter count" [ -s "$work/model_parameters.want" ]
check_program model_parameters timelyfreeze-exec "$(so tfexec_core)"
finish "installed package"
