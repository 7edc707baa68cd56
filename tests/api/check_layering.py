#!/usr/bin/env python3
"""check_layering.py - the planner's rooms call only downwards, and no two
of its files call each other in a circle.

Reads the object files given on the command line (the tfplanner and
tfrender libraries' own, whose paths end in src/ROOM/FILE.c.o) with nm:
every undefined symbol of one file that another defines is an edge
"file -> file".  It fails, printing the edge or the circle with the
symbols that make it, when

  - a file calls into a room later in ROOMS than its own (model/ may call
    nothing but model/; render/ may call every room), or
  - files call each other in a circle (within a room or across rooms).

Usage: check_layering.py NM OBJECT...   Exit 0 clean, 1 violations, 2 bad use.
"""
import subprocess
import sys

# The rooms of planner/src, lowest first: each may call itself and the rooms
# before it, never one after it.
ROOMS = ["model", "solve", "pipeline", "render"]


def file_of(obj):
    """'.../tfplanner.dir/src/model/plan.c.o' -> 'model/plan.c'."""
    path = obj.replace("\\", "/")
    if "/src/" not in path or not path.endswith(".o"):
        sys.exit(f"check_layering: {obj}: not an object file under src/ROOM/")
    return path.rsplit("/src/", 1)[1][: -len(".o")]


def symbols(nm, obj, *flags):
    out = subprocess.run([nm, *flags, obj], check=True, capture_output=True, text=True).stdout
    names = set()
    for line in out.splitlines():
        fields = line.split()
        if fields:
            names.add(fields[-1])
    return names


def call_graph(nm, objects):
    """{file: {file: sorted symbols}} over the files' global symbols."""
    defined_by, undefined = {}, {}
    for obj in objects:
        f = file_of(obj)
        for name in symbols(nm, obj, "--extern-only", "--defined-only"):
            defined_by[name] = f
        undefined[f] = symbols(nm, obj, "--undefined-only")
    graph = {f: {} for f in undefined}
    for f, names in undefined.items():
        for name in names:
            g = defined_by.get(name)
            if g and g != f:
                graph[f].setdefault(g, []).append(name)
    return graph


def room_of(f):
    return f.split("/", 1)[0]


def upward_edges(graph):
    problems = []
    for f, targets in sorted(graph.items()):
        if room_of(f) not in ROOMS:
            problems.append(f"{f}: room {room_of(f)}/ has no place in ROOMS {ROOMS}")
            continue
        for g, names in sorted(targets.items()):
            if room_of(g) in ROOMS and ROOMS.index(room_of(g)) > ROOMS.index(room_of(f)):
                problems.append(f"{f} -> {g} ({', '.join(sorted(names))}): "
                                f"{room_of(f)}/ may not call up into {room_of(g)}/")
    return problems


def find_cycle(graph, start):
    """A path start -> ... -> start, or None (depth-first, iterative)."""
    stack, seen = [(start, iter(sorted(graph[start])))], {start}
    while stack:
        node, it = stack[-1]
        nxt = next(it, None)
        if nxt is None:
            stack.pop()
        elif nxt == start:
            return [n for n, _ in stack] + [start]
        elif nxt not in seen:
            seen.add(nxt)
            stack.append((nxt, iter(sorted(graph[nxt]))))
    return None


def cycles(graph):
    """Each circle once, named from its least file."""
    problems, reported = [], set()
    for f in sorted(graph):
        cycle = find_cycle(graph, f)
        if not cycle:
            continue
        ring = cycle[:-1]
        least = ring.index(min(ring))
        ring = ring[least:] + ring[:least]
        if tuple(ring) in reported:
            continue
        reported.add(tuple(ring))
        hops = [f"{a} -> {b} ({', '.join(sorted(graph[a][b]))})"
                for a, b in zip(ring, ring[1:] + ring[:1])]
        problems.append("circle: " + "; ".join(hops))
    return problems


def main(argv):
    if len(argv) < 3:
        print(next(l for l in __doc__.splitlines() if l.startswith("Usage")), file=sys.stderr)
        return 2
    graph = call_graph(argv[1], argv[2:])
    edges = sum(len(t) for t in graph.values())
    # A graph this small means the objects were not read, not a clean tree.
    if len(graph) < 10 or edges < 10:
        print(f"check_layering: only {len(graph)} files and {edges} calls read", file=sys.stderr)
        return 2
    problems = upward_edges(graph) + cycles(graph)
    for p in problems:
        print(p)
    print(f"{len(graph)} files, {edges} file-to-file calls, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
