#!/usr/bin/env python3
"""check_signatures.py - no public function takes more than MAX_PARAMS
parameters.

Parses each public header (every INCLUDE_DIR/*/*.h: include/tf/*.h,
include/tfx/*.h) with clang (-Xclang -ast-dump=json) and counts the
parameters of every function the header itself declares (functions it gets
from other headers are counted in theirs).  A longer list belongs in a
struct with an init function, as tf_freeze_problem is, or in two
functions.  Prints each offender as HEADER:LINE: NAME takes N parameters.

Usage: check_signatures.py CLANG INCLUDE_DIR...
Exit 0 clean, 1 offenders, 2 a header clang could not parse, 77 no clang
(CLANG empty or not found: the check is skipped).
"""
import glob
import json
import os
import shutil
import subprocess
import sys

MAX_PARAMS = 6


class Walker:
    """Follows clang's JSON locations, which name their file only when it
    changes from the location printed before; so the nodes are read in the
    order clang printed them and the last file named is the current one."""

    def __init__(self):
        self.file = None

    def note(self, loc):
        if not isinstance(loc, dict):
            return
        for key in ("spellingLoc", "expansionLoc"):
            self.note(loc.get(key))
        if "file" in loc:
            self.file = loc["file"]

    def top_level(self, tu):
        """Yields (file, line, node) for each top-level declaration."""
        for node in tu.get("inner", []):
            self.note(node.get("loc"))
            where, line = self.file, node.get("loc", {}).get("line")
            rng = node.get("range", {})
            self.note(rng.get("begin"))
            self.note(rng.get("end"))
            yield where, line, node
            self.skip(node.get("inner", []))

    def skip(self, nodes):
        for node in nodes:
            self.note(node.get("loc"))
            rng = node.get("range", {})
            self.note(rng.get("begin"))
            self.note(rng.get("end"))
            self.skip(node.get("inner", []))


def offenders(clang, flags, header):
    cmd = [clang, "-x", "c", "-std=c11", "-fsyntax-only", "-Xclang", "-ast-dump=json",
           *flags, header]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        sys.stderr.write(run.stderr)
        print(f"check_signatures: clang could not parse {header}", file=sys.stderr)
        raise SystemExit(2)
    found = []
    for where, line, node in Walker().top_level(json.loads(run.stdout)):
        if node.get("kind") != "FunctionDecl" or where is None:
            continue
        if os.path.realpath(where) != header:
            continue
        params = sum(1 for c in node.get("inner", []) if c.get("kind") == "ParmVarDecl")
        if params > MAX_PARAMS:
            found.append(f"{header}:{line}: {node['name']} takes {params} parameters "
                         f"(at most {MAX_PARAMS})")
    return found


def main(argv):
    if len(argv) < 3:
        print(next(l for l in __doc__.splitlines() if l.startswith("Usage")), file=sys.stderr)
        return 2
    clang, dirs = argv[1], [os.path.realpath(d) for d in argv[2:]]
    if not clang or not shutil.which(clang):
        print("check_signatures: skipped, no clang to parse the headers with")
        return 77
    flags = [f"-I{d}" for d in dirs]
    headers = sorted(h for d in dirs for h in glob.glob(os.path.join(d, "*", "*.h")))
    if not headers:
        print(f"check_signatures: no headers under {dirs}", file=sys.stderr)
        return 2
    problems = []
    for header in headers:
        problems += offenders(clang, flags, header)
    for p in problems:
        print(p)
    print(f"{len(headers)} headers, {len(problems)} functions over {MAX_PARAMS} parameters")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
