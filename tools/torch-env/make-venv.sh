#!/usr/bin/env bash
# Makes the PyTorch environment that the tests needing torch run in, or
# reuses it when it is up to date, and prints its python on stdout (progress
# goes to stderr).
#
#   bash tools/torch-env/make-venv.sh [DIR]     DIR defaults to .venv-torch
#                                               in the repository
#
# A venv of python3 (TF_VENV_PYTHON overrides it; CPython 3.11, as Debian 12
# has) with requirements.txt installed by hash, without torch's nvidia-*
# dependencies, and with the stand-in CUDA libraries of cuda_stubs.py in their
# place: torch runs on the CPU only.  DIR/tf-env.sha256 holds the hash of
# requirements.txt and cuda_stubs.py that DIR was made from; when it matches,
# DIR is reused without network.  Otherwise DIR (if it is a venv) is made
# again.  Needs python3's venv module (Debian: python3-venv), a C compiler and
# readelf (build-essential).  Exit status 0 on success, 1 otherwise.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
venv=${1:-$root/.venv-torch}
python=${TF_VENV_PYTHON:-python3}
requirements=$here/requirements.txt
stubs=$here/cuda_stubs.py
stamp=$venv/tf-env.sha256

want=$(cat "$requirements" "$stubs" | sha256sum | cut -d' ' -f1)
if [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  echo "$venv/bin/python"
  exit 0
fi
if [ -e "$venv" ] && [ ! -f "$venv/pyvenv.cfg" ]; then
  echo "make-venv: $venv exists and is not a venv; not touching it" >&2
  exit 1
fi

rm -rf "$venv"
echo "make-venv: creating $venv (about 600 MB from PyPI)" >&2
"$python" -m venv "$venv"
# pip byte-compiles on one core; compileall does it on all of them, and
# without .pyc files every process that imports torch compiles it again
# (where PYTHONDONTWRITEBYTECODE is set, on every run).  A few files are
# written for newer Pythons (torch/testing/_internal/py312_intrinsics.py)
# and stay uncompiled, as pip leaves them: compileall's status is no error.
"$venv/bin/python" -m pip install --quiet --no-deps --require-hashes --only-binary=:all: \
  --no-compile -r "$requirements" >&2
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
"$venv/bin/python" -m compileall -q -j 0 "$site" > /dev/null 2>&1 || true
"$venv/bin/python" "$stubs" "$site" >&2
"$venv/bin/python" -c 'import torch, torch.distributed as dist
assert dist.is_gloo_available(), "this torch has no gloo"
print("make-venv: torch", torch.__version__, "imports; gloo is available")' >&2
echo "$want" > "$stamp"
echo "$venv/bin/python"
