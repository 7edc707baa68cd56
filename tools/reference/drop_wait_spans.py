#!/usr/bin/env python3
"""Copies a torch.profiler trace without the spans tf-import does not read
yet: PyTorch 2.15's pipelining runtime also names the waits it adds for its
sends and gradient reductions, PP:<stage>WAIT_SEND_F<mb>,
PP:<stage>WAIT_SEND_B<mb> and PP:<stage>WAIT_REDUCE_GRAD, and tf-import
refuses a PP: name it does not know.  Every other event is copied as it is.

    python3 drop_wait_spans.py IN.json[.gz] OUT.json

Standard library only.  Exit status 0, 1 when IN cannot be read as a
trace."""
import gzip
import json
import re
import sys

WAIT = re.compile(r"PP:\d+(WAIT_SEND_[FB]\d+|WAIT_REDUCE_GRAD)$")


def read_trace(path):
    """The parsed trace at path, plain JSON or gzip (by its first bytes)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return json.loads(data)


def without_waits(trace):
    """The trace (Kineto's object or the legacy bare array) without the
    wait spans; returns (trace, how many were dropped)."""
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    kept = [e for e in events if not WAIT.match(str(e.get("name", "")))]
    if isinstance(trace, dict):
        return dict(trace, traceEvents=kept), len(events) - len(kept)
    return kept, len(events) - len(kept)


def main(argv):
    if len(argv) != 3:
        print("usage: drop_wait_spans.py IN.json[.gz] OUT.json", file=sys.stderr)
        return 2
    try:
        trace, dropped = without_waits(read_trace(argv[1]))
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"drop_wait_spans: {argv[1]}: {e}", file=sys.stderr)
        return 1
    with open(argv[2], "w", encoding="utf-8") as f:
        json.dump(trace, f)
    print(f"drop_wait_spans: {argv[1]}: {dropped} wait spans dropped", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
