#!/usr/bin/env bash
# Set-up in one command on a fresh Debian 12 machine (run as root).
#
#   bash tools/bootstrap.sh demo   install packages, build, install the programs
#                                  and libraries under /usr/local (PREFIX=DIR for
#                                  another place), plan the bundled LLaMA-3.1-8B
#                                  trace and draw its timeline
#   bash tools/bootstrap.sh pytorch
#                                  install packages, make (or reuse) the PyTorch
#                                  environment .venv-torch (tools/torch-env: CPU
#                                  torch from PyPI, about 600 MB) and print its
#                                  python
#   bash tools/bootstrap.sh test   install packages, make the PyTorch environment,
#                                  build with AddressSanitizer and
#                                  UndefinedBehaviorSanitizer, run every test (the
#                                  tests that need torch with that environment,
#                                  failing rather than skipping without it);
#                                  then an optimised build with warnings as errors
#                                  (some warnings need the optimiser's analysis);
#                                  where clang is installed, also a short run of
#                                  every fuzz target and the executor's runtime
#                                  and transport tests under ThreadSanitizer
#
# Packages are installed only when missing and the PyTorch environment is
# reused while tools/torch-env is unchanged, so a second run needs no network.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential cmake pkg-config python3 python3-venv
          liblpsolve55-dev coinor-libclp-dev libcjson-dev libgraphviz-dev libcmocka-dev
          libopenblas-dev zlib1g-dev fonts-dejavu-core)

install_missing() {
  local missing=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "installing: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
}

jobs=$(nproc 2>/dev/null || echo 2)

case "${1:-}" in
  demo)
    install_missing
    prefix=${PREFIX:-/usr/local}
    cmake -S . -B build -DCMAKE_BUILD_TYPE=Release > /dev/null
    cmake --build build -j "$jobs" > /dev/null
    cmake --install build --prefix "$prefix" > /dev/null
    mkdir -p out
    "$prefix/bin/tf-plan" traces/llama8b-1f1b-h200.profile.json -o out/llama8b-1f1b.plan.json \
      --timeline out/llama8b-1f1b.svg
    ;;
  pytorch)
    install_missing
    bash tools/torch-env/make-venv.sh
    ;;
  test)
    install_missing
    torch_python=$(bash tools/torch-env/make-venv.sh)
    cmake -S . -B build-sanitize -DTF_SANITIZE=ON -DTF_WERROR=ON -DCMAKE_BUILD_TYPE=Debug \
      -DTF_TORCH_PYTHON="$torch_python" -DTF_REQUIRE_TORCH=ON > /dev/null
    cmake --build build-sanitize -j "$jobs"
    (cd build-sanitize &&
      ASAN_OPTIONS=abort_on_error=0:detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        ctest --output-on-failure -j "$jobs")
    cmake -S . -B build-werror -DTF_WERROR=ON -DTF_BUILD_TESTS=OFF -DCMAKE_BUILD_TYPE=Release > /dev/null
    cmake --build build-werror -j "$jobs" > /dev/null
    if command -v clang > /dev/null; then
      # libFuzzer and a ThreadSanitizer that copes with gcc's CPU-specific
      # function versions both need clang (docs/robustness.md).
      CC=clang cmake -S . -B build-fuzz -DTF_FUZZ=ON > /dev/null
      cmake --build build-fuzz -j "$jobs" > /dev/null
      (cd build-fuzz && ctest --output-on-failure -R fuzz_short)
      CC=clang cmake -S . -B build-tsan -DTF_TSAN=ON > /dev/null
      cmake --build build-tsan -j "$jobs" > /dev/null
      (cd build-tsan && TSAN_OPTIONS=halt_on_error=1 \
        ctest --output-on-failure -R 'test_exec_(pipeline|socket|mailbox|measure|kfac)')
    else
      echo "clang is not installed: the fuzz targets and ThreadSanitizer are skipped"
    fi
    ;;
  *)
    echo "usage: bash tools/bootstrap.sh demo|pytorch|test" >&2
    exit 2
    ;;
esac
