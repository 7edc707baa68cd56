#!/usr/bin/env python3
"""Writes large legacy-layout traces of one rank (stage 0), generated rather
than committed (standard library only):

    make_large.py KIND COUNT OUT

- steps COUNT: COUNT ProfilerStep#N spans, each holding PP:0F0 and PP:0B0
  (160,000 steps make about 24 MB);
- actions COUNT: one step holding COUNT actions: stages 0-3 on the one
  rank, F and B of COUNT/8 microbatches each;
- receives COUNT: two ranks of a GPipe run (OUT-rank0.json and
  OUT-rank1.json), steps of 12,500 microbatches, in which each action that
  takes the other rank's data waits in a receive: COUNT `PP:1RECV_F<m>`
  and `PP:0RECV_B<m>` spans in all, each lasting to the end of its step
  and holding one `gloo:recv` that ends 1 us into its action (data takes 3
  us each way);
- events COUNT: COUNT small events, all of them read: steps of 0F0 0F1
  0F2 0F3 0B0 0B1 0B2 0B3 (a ProfilerStep span and 8 actions, 1 us each).

Events are written one per line, as short as the legacy profiler's.
"""
import sys


def event(name, ts, dur):
    return f'{{"name":"{name}","ph":"X","ts":{ts},"dur":{dur}}}'


def steps(count):
    for n in range(count):
        t = 10 * n
        yield event(f"ProfilerStep#{n}", t, 9)
        yield event("PP:0F0", t + 1, 3)
        yield event("PP:0B0", t + 5, 3)


def actions(count):
    per_stage = count // 8
    yield event("ProfilerStep#0", 0, 10 * count + 10)
    t = 1
    for kind in "FB":
        for stage in range(4) if kind == "F" else range(3, -1, -1):
            for m in range(per_stage):
                yield event(f"PP:{stage}{kind}{m}", t, 5)
                t += 10


RECV_MICROBATCHES = 12500


def receives(count, rank):
    """One rank's part: it sends F (rank 0) or B (rank 1) and receives the
    other; the receiver starts each action 2 us after the sender ended it
    and computes from 1 us later, when its receive ends."""
    m_count = RECV_MICROBATCHES
    length = 20 * m_count + 40
    for n in range(max(1, count // (2 * m_count))):
        t0 = n * (length + 100)
        yield event(f"ProfilerStep#{n}", t0, length)
        for kind, phase in (("F", t0 + 10), ("B", t0 + 10 * m_count + 30)):
            receiver = 1 if kind == "F" else 0
            for m in range(m_count):
                t = phase + 10 * m
                if rank != receiver:
                    yield event(f"PP:{rank}{kind}{m}", t, 5)
                    continue
                yield event(f"PP:{rank}RECV_{kind}{m}", t + 6, t0 + length - t - 7)
                yield event("gloo:recv", t + 6.5, 1.5)
                yield event(f"PP:{rank}{kind}{m}", t + 7, 5)


def small_events(count):
    per_step = 9
    for n in range(count // per_step):
        t = 20 * n
        yield event(f"ProfilerStep#{n}", t, 19)
        for i, cell in enumerate(("0F0", "0F1", "0F2", "0F3", "0B0", "0B1", "0B2", "0B3")):
            yield event(f"PP:{cell}", t + 1 + 2 * i, 1)


def write(path, lines):
    with open(path, "w") as f:
        f.write("[\n")
        first = True
        for line in lines:
            f.write(line if first else ",\n" + line)
            first = False
        f.write("\n]\n")


def main():
    kind, count, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    if kind == "receives":
        for rank in (0, 1):
            write(f"{out}-rank{rank}.json", receives(count, rank))
        return
    make = {"steps": steps, "actions": actions, "events": small_events}[kind]
    write(out, make(count))


if __name__ == "__main__":
    main()
