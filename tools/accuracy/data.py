"""The text study's data, built from files Debian 12 ships, and the
training windows a seed draws.

Pretraining: the Python standard library, /usr/lib/python3.11/*.py (the
python3.11 packages; python3 is one of the toolkit's build dependencies),
the files in byte order of their names, concatenated, the first 3,000,000
bytes: the file the README trains on.

Fine-tuning: the C headers of the C library, the files of libc6-dev
directly under /usr/include (dpkg-query -L libc6-dev; build-essential
installs it), in byte order of their names, concatenated: about 1 MB.  C
after Python is a real shift with something to keep (identifiers, English
comments, indentation) and much to learn (declarations, macros, braces).
libc6-dev's list is fixed by its version, unlike a glob of /usr/include,
which any installed package can change.  English from
/usr/share/common-licenses was the other candidate; it is 300 kB of
licences that repeat each other (GPL-2 / LGPL-2 / LGPL-2.1, GFDL-1.2 /
1.3), so its held-out part would be text seen in training.

tf-exec holds out the last 5% of each file for validation (corpus.h).
"""
import glob
import hashlib
import os
import subprocess

from timelyfreeze_plan import Rng

PRETRAIN_GLOB = "/usr/lib/python3.11/*.py"
PRETRAIN_BYTES = 3000000
FINETUNE_PACKAGE = "libc6-dev"
HEADER_DIR = "/usr/include/"
BUILTIN_BYTES = 1 << 20   # tf-exec's built-in sources (exec_run.c)
DATA_DOMAIN = 2           # TFX_RNG_DATA (tfx/rng.h): the training windows


class DataError(Exception):
    """A data file that cannot be built: the message says which path and
    what to install."""


def _python_sources(root):
    pattern = root + PRETRAIN_GLOB
    files = sorted(glob.glob(pattern))
    if not files:
        raise DataError("no files match %s (the Python 3.11 standard library; on Debian 12: "
                        "apt-get install python3)" % pattern)
    return files


def _libc_headers(root):
    """libc6-dev's headers directly under /usr/include, under root."""
    try:
        listed = subprocess.run(["dpkg-query", "-L", FINETUNE_PACKAGE], capture_output=True,
                                text=True, check=True).stdout.split("\n")
    except (OSError, subprocess.CalledProcessError) as e:
        raise DataError("dpkg-query -L %s failed (%s): the text study needs Debian's C "
                        "library headers (apt-get install build-essential)"
                        % (FINETUNE_PACKAGE, e)) from None
    names = sorted(p for p in listed if p.startswith(HEADER_DIR) and p.endswith(".h")
                   and "/" not in p[len(HEADER_DIR):])
    files = [root + p for p in names]
    missing = [f for f in files if not os.path.isfile(f)]
    if not names or missing:
        raise DataError("%s: %s (the headers %s lists; apt-get install --reinstall %s)" % (
            FINETUNE_PACKAGE, "lists no headers" if not names else "missing " + missing[0],
            FINETUNE_PACKAGE, FINETUNE_PACKAGE))
    return files


def _concatenate(files, limit, path):
    """Writes the files one after another to path, at most limit bytes
    (None: all).  Returns (bytes written, sha256)."""
    data = b"".join(open(f, "rb").read() for f in files)
    if limit is not None:
        data = data[:limit]
    with open(path, "wb") as f:
        f.write(data)
    return len(data), hashlib.sha256(data).hexdigest()


def _package_version(name):
    try:
        return subprocess.run(["dpkg-query", "-W", "-f", "${Version}", name],
                              capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def build_text_data(out, root=""):
    """Writes out/pretrain.txt and out/finetune.txt.  Returns their
    provenance: {"pretrain": {...}, "finetune": {...}} with the path, the
    source, the file count, the first and last file, bytes and sha256.
    Raises DataError naming the missing path or package."""
    os.makedirs(out, exist_ok=True)
    sources = {"pretrain": (_python_sources(root), PRETRAIN_BYTES, PRETRAIN_GLOB,
                            "python3.11"),
               "finetune": (_libc_headers(root), None, FINETUNE_PACKAGE + " headers in "
                            + HEADER_DIR, FINETUNE_PACKAGE)}
    made = {}
    for part, (files, limit, what, package) in sources.items():
        path = os.path.join(out, part + ".txt")
        size, digest = _concatenate(files, limit, path)
        made[part] = dict(path=path, source=what, package=package,
                          package_version=_package_version(package), files=len(files),
                          first=files[0], last=files[-1], bytes=size, sha256=digest,
                          limit=limit)
    return made


def corpus_positions(length, context):
    """How many windows tf-exec can start in a corpus of `length` bytes:
    its training part (the last 5%, at least one sequence, is held out)
    less one context (tfx_corpus_batch)."""
    held_out = max(length // 20, context + 1)
    return length - held_out - context


def window_starts(seed, steps, microbatches, sequences, positions):
    """The start of every training window a seed draws, step by step (the
    executor's stream (seed, data, step, microbatch, sequence))."""
    return [Rng.for_coords(seed, DATA_DOMAIN, step, m, q).below(positions)
            for step in range(steps) for m in range(microbatches) for q in range(sequences)]


def window_check(seeds, steps, microbatches, sequences, positions):
    """Distinct windows per seed and windows shared by each pair of seeds,
    beside what independent uniform draws give on average."""
    starts = {s: set(window_starts(s, steps, microbatches, sequences, positions))
              for s in seeds}
    draws = steps * microbatches * sequences
    expected_distinct = positions * (1.0 - (1.0 - 1.0 / positions) ** draws)
    shared = {"%d-%d" % (a, b): len(starts[a] & starts[b])
              for i, a in enumerate(seeds) for b in seeds[i + 1:]}
    return dict(draws_per_seed=draws, positions=positions,
                distinct_per_seed={str(s): len(starts[s]) for s in seeds},
                expected_distinct=round(expected_distinct, 1),
                shared_between_seeds=shared,
                expected_shared=round(expected_distinct ** 2 / positions, 1))
