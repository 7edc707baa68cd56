"""Stand-in CUDA libraries that let PyPI's torch wheel import on a machine
without CUDA, so that its CPU half runs without the nvidia-* wheels.

PyPI's Linux x86_64 torch is one build for CPU and GPU: libtorch_cpu.so,
libtorch_cuda.so and the rest list CUDA's libraries (libcudart, cuBLAS,
cuDNN, NCCL, CUPTI, ...) as NEEDED, and Python loads extensions with
RTLD_NOW, so every symbol torch takes from them must resolve at import
time even though a CPU run never calls one.  The real libraries come from
about 2.5 GB of nvidia-* wheels.  This script writes, for each such
library, a small shared object with the same soname, the version node
torch's references name, and one definition for each symbol torch
references from it, into the first folder of torch's own RUNPATH
(site-packages/nvidia/<...>/lib, where the nvidia-* wheels would put the
real ones), so no environment variable is needed.

Every stand-in function fails: it returns 100 (cudaErrorNoDevice in the
CUDA runtime; a non-zero status is a failure in every one of these APIs),
and the few that return a message (*ErrorString, *ErrorName,
ncclGetLastError) return one saying there is no CUDA.  So torch finds no
GPU (torch.cuda.is_available() is False, as on any machine without one)
instead of crashing.  libcuda.so.1, the driver, gets no stand-in: torch
opens it only on GPU paths, and its absence is what a machine without a
GPU has.

    python cuda_stubs.py SITE_PACKAGES [--cc CC]

needs readelf (binutils) and a C compiler.  Exit status 0 when the
stand-ins are written, 1 with a message naming what is wrong otherwise.
"""
import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile

# Sonames the nvidia-* wheels provide; libcuda.so.1 is the driver.
CUDA_SONAME = re.compile(r"lib(cu|nv|nccl)\w*\.so(\.\d+)*$")
DRIVER = "libcuda.so.1"
STATUS = 100
MESSAGE = "no CUDA: this is a stand-in library (tools/torch-env/cuda_stubs.py)"
RETURNS_MESSAGE = re.compile(r"(ErrorString|ErrorName)$|^ncclGetLastError$")
SYMBOL = re.compile(r"^[A-Za-z_]\w*$")


class StubError(Exception):
    pass


def readelf(flag, path):
    """readelf's wide output of one table (-d, -V or --dyn-syms) of `path`."""
    try:
        done = subprocess.run(["readelf", "-W", flag, path], check=True,
                              capture_output=True, text=True)
    except FileNotFoundError:
        raise StubError("readelf is not installed (Debian: binutils)")
    except subprocess.CalledProcessError as e:
        raise StubError(f"readelf {flag} {path}: {e.stderr.strip()}")
    return done.stdout


def needed(path):
    """The sonames `path` lists as NEEDED."""
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", readelf("-d", path))


def runpath(path):
    """The folders of `path`'s RUNPATH (or RPATH), $ORIGIN expanded."""
    found = re.search(r"\((?:RUNPATH|RPATH)\)\s+Library (?:runpath|rpath): \[([^\]]*)\]",
                      readelf("-d", path))
    origin = os.path.dirname(os.path.abspath(path))
    folders = found.group(1).split(":") if found else []
    return [os.path.normpath(f.replace("$ORIGIN", origin)) for f in folders if f]


def version_files(path):
    """Maps each version node `path` needs to the soname that must define it."""
    nodes, current = {}, None
    for line in readelf("-V", path).splitlines():
        f = re.search(r"File: (\S+)", line)
        if f:
            current = f.group(1)
            continue
        n = re.search(r"Name: (\S+)", line)
        if n and current:
            nodes[n.group(1)] = current
    return nodes


def undefined(path):
    """(name, version node or None, is_object) of each undefined, non-weak
    dynamic symbol of `path`."""
    out = []
    for line in readelf("--dyn-syms", path).splitlines():
        cols = line.split()
        if len(cols) < 8 or cols[6] != "UND" or cols[4] == "WEAK":
            continue
        name, _, version = cols[7].partition("@")
        out.append((name, version.lstrip("@") or None, cols[3] == "OBJECT"))
    return out


def stem(soname):
    return soname[3:].split(".so")[0].lower()


def owner(name, sonames):
    """The soname an unversioned CUDA symbol belongs to: the one whose stem
    starts it (longest stem first: cusparseLt before cusparse)."""
    for soname in sorted(sonames, key=lambda s: -len(stem(s))):
        if name.lower().startswith(stem(soname)):
            return soname
    return None


def plan(libs):
    """{soname: (version nodes, functions, objects)} of the stand-ins that
    `libs` (torch's shared objects) need."""
    ours = {os.path.basename(p) for p in libs}
    sonames = {s for p in libs for s in needed(p)
               if CUDA_SONAME.match(s) and s != DRIVER and s not in ours}
    stubs = {s: (set(), set(), set()) for s in sonames}
    for path in libs:
        files = version_files(path)
        for name, version, is_object in undefined(path):
            soname = files.get(version) if version else owner(name, sonames)
            if soname not in stubs:
                continue
            if not SYMBOL.match(name):
                raise StubError(f"{path}: symbol {name!r} is not a C identifier")
            nodes, functions, objects = stubs[soname]
            if version:
                nodes.add(version)
            (objects if is_object else functions).add(name)
    return stubs


def c_source(functions, objects):
    lines = [f"static const char message[] = \"{MESSAGE}\";"]
    lines += [f"char {name}[64];" for name in sorted(objects)]
    for name in sorted(functions):
        value = "(long)message" if RETURNS_MESSAGE.search(name) else str(STATUS)
        lines.append(f"long {name}(void) {{ return {value}; }}")
    return "\n".join(lines) + "\n"


def build(soname, entry, folder, cc, scratch):
    """Compiles the stand-in for `soname` into `folder`."""
    nodes, functions, objects = entry
    if len(nodes) > 1:
        raise StubError(f"{soname}: torch needs several version nodes {sorted(nodes)}")
    source = os.path.join(scratch, soname + ".c")
    with open(source, "w") as f:
        f.write(c_source(functions, objects))
    command = [cc, "-shared", "-fPIC", "-O1", "-w", "-o", os.path.join(folder, soname), source,
               f"-Wl,-soname,{soname}"]
    if nodes:
        script = os.path.join(scratch, soname + ".map")
        with open(script, "w") as f:
            f.write(f"{next(iter(nodes))} {{ global: *; }};\n")
        command.append(f"-Wl,--version-script={script}")
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise StubError(f"{cc} for {soname} failed: {done.stderr.strip()}")


def write_stubs(site, cc):
    """Writes the stand-ins for the torch under `site`; returns their folder
    and sonames."""
    libdir = os.path.join(site, "torch", "lib")
    libs = sorted(glob.glob(os.path.join(libdir, "*.so*")) +
                  glob.glob(os.path.join(site, "torch", "_C*.so")))
    if not libs:
        raise StubError(f"{libdir}: no torch libraries (is torch installed there?)")
    folders = [f for f in runpath(os.path.join(libdir, "libtorch_cpu.so"))
               if os.path.normpath(f) != os.path.normpath(libdir)]
    if not folders:
        raise StubError(f"{libdir}/libtorch_cpu.so has no RUNPATH folder outside torch/lib")
    stubs = plan(libs)
    os.makedirs(folders[0], exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        for soname, entry in sorted(stubs.items()):
            build(soname, entry, folders[0], cc, scratch)
    return folders[0], sorted(stubs)


def main(argv=None):
    parser = argparse.ArgumentParser(description="Stand-in CUDA libraries for PyPI's torch.")
    parser.add_argument("site_packages")
    parser.add_argument("--cc", default=os.environ.get("CC", "cc"))
    args = parser.parse_args(argv)
    try:
        folder, sonames = write_stubs(args.site_packages, args.cc)
    except StubError as e:
        print(f"cuda_stubs: {e}", file=sys.stderr)
        return 1
    print(f"cuda_stubs: {len(sonames)} stand-in libraries in {folder}: {' '.join(sonames)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
