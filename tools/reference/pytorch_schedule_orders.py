#!/usr/bin/env python3
"""Reference generator: PyTorch's per-rank orders of ScheduleLoopedBFS and
ScheduleDualPipeV, written as golden compute-only CSVs.

REFERENCE ONLY, NOT PROJECT CODE.  The order functions below are transcribed
as faithfully as possible (same statements, same names, torch stripped) from
PyTorch's

    torch/distributed/pipelining/schedules.py
        ScheduleLoopedBFS._calculate_single_rank_operations
        ScheduleDualPipeV._calculate_single_rank_operations
        _Action.__repr__, _validate_schedule (its counting part)
    torch/distributed/pipelining/_utils.py
        generate_stage_to_rank_mapping, generate_rank_to_stage_mapping

of the public repository pytorch/pytorch, schedules.py at commit
00722e648b740f91d0e71494baa17891749fd291 (read in November 2026; DualPipeV
arrived in that file in August 2025).  The planner's C code
(planner/src/model/schedule.c) is written independently; this script only
produces the files tests/planner/test_schedule.c compares it with.

Debian 12's torch (1.13) predates both schedules, so PyTorch cannot be
imported for them; everything here needs only the Python standard library.

    python3 tools/reference/pytorch_schedule_orders.py --out tests/planner/golden/schedules

writes <Name>_p<P>_v<V>_m<M>.csv for every shape in SHAPES (one row per rank,
PyTorch's idle slots left out, overlapped pairs as PyTorch prints them:
"(0F7;7B3)OVERLAP_F_B").  --check FILE compares one CSV (e.g. PyTorch's
test artifact dualpipev_4rank_10mb.csv) with the order generated for the
shape --check-shape NAME,P,V,M.
"""
import argparse
import csv
import os
import sys
from typing import NamedTuple, Optional, Tuple

# ---- _ComputationType and _Action (the parts the orders use) ---------------

FORWARD = "F"
BACKWARD_INPUT = "I"
BACKWARD_WEIGHT = "W"
FULL_BACKWARD = "B"
OVERLAP_F_B = "OVERLAP_F_B"
F, I, W, B = FORWARD, BACKWARD_INPUT, BACKWARD_WEIGHT, FULL_BACKWARD


class _Action(NamedTuple):
    stage_index: int
    computation_type: str
    microbatch_index: Optional[int] = None
    sub_actions: Optional[Tuple["_Action", ...]] = None

    def __repr__(self):
        if self.sub_actions is not None:
            sub_action_reprs = [repr(sub_action) for sub_action in self.sub_actions]
            return f"({';'.join(sub_action_reprs)}){self.computation_type}"
        repr_str = str(self.stage_index)
        repr_str += self.computation_type
        if self.microbatch_index is not None:
            repr_str += str(self.microbatch_index)
        return repr_str

    __str__ = __repr__


# ---- _utils.py --------------------------------------------------------------

def generate_stage_to_rank_mapping(pp_size, num_stages, style="loop"):
    mapping = {}
    if style == "loop":
        for stage_index in range(num_stages):
            mapping[stage_index] = stage_index % pp_size
    elif style == "v":
        if num_stages % pp_size != 0:
            raise ValueError(
                f"num_stages {num_stages} must be evenly divisible by pp_size {pp_size} for V schedules"
            )
        rank_index = 0
        for stage_index in range(num_stages):
            mapping[stage_index] = rank_index
            # dont change rank if we are on the border (to keep v shape)
            if (stage_index + 1) % pp_size == 0:
                continue
            if (stage_index // pp_size) % 2 == 0:
                rank_index += 1
            else:
                rank_index -= 1
    else:
        raise ValueError(f"Style {style} is not supported.")
    return mapping


def generate_rank_to_stage_mapping(pp_size, num_stages, style="loop"):
    stage_to_rank = generate_stage_to_rank_mapping(pp_size, num_stages, style)
    rank_to_stages = {}
    for stage_id, rank in stage_to_rank.items():
        if rank not in rank_to_stages:
            rank_to_stages[rank] = []
        rank_to_stages[rank].append(stage_id)
    for stages in rank_to_stages.values():
        stages.sort()
    return rank_to_stages


# ---- ScheduleLoopedBFS --------------------------------------------------------

class LoopedBFS:
    """The attributes ScheduleLoopedBFS._calculate_single_rank_operations reads."""

    def __init__(self, pp_group_size, n_local_stages, n_microbatches):
        self.pp_group_size = pp_group_size
        self._stages = [None] * n_local_stages
        self._n_microbatches = n_microbatches

    def _calculate_single_rank_operations(self, rank):
        n_local_stages = len(self._stages)
        stage_indices = range(
            rank, self.pp_group_size * n_local_stages, self.pp_group_size
        )

        # Store the list of operations used for that rank
        # Pre-padding, rank starts with no-ops based on the warmup.
        rank_ops = [None for _ in range(rank)]

        for stage_index in stage_indices:
            rank_ops.extend(
                _Action(stage_index, FORWARD, mb_index)
                for mb_index in range(self._n_microbatches)
            )

        # wait for the first backward to trickle up
        # which is 2 for every hop away
        post_warmup_ops = 2 * (self.pp_group_size - 1 - rank)
        rank_ops.extend([None] * post_warmup_ops)

        for stage_index in reversed(stage_indices):
            rank_ops.extend(
                _Action(stage_index, FULL_BACKWARD, mb_index)
                for mb_index in reversed(range(self._n_microbatches))
            )
        return rank_ops

    def stage_to_rank(self):
        return generate_stage_to_rank_mapping(
            self.pp_group_size, self.pp_group_size * len(self._stages), "loop"
        )


# ---- ScheduleDualPipeV --------------------------------------------------------

class DualPipeV:
    """The attributes ScheduleDualPipeV._calculate_single_rank_operations reads,
    and the checks its __init__ makes."""

    def __init__(self, pp_group_size, n_local_stages, n_microbatches):
        self.pp_group_size = pp_group_size
        self._n_microbatches = n_microbatches
        self._num_stages = pp_group_size * n_local_stages
        self.n_local_stages = n_local_stages
        if self.n_local_stages != 2:
            raise ValueError(
                "ZBV requires exactly 2 stages per rank, but got "
                f"{self.n_local_stages}."
            )
        if n_microbatches < self._num_stages:
            raise ValueError(
                "DualPipeV requires at least as many microbatches as stages, but got "
                f"{n_microbatches} microbatches and {self._num_stages} stages."
            )

    def _calculate_single_rank_operations(self, rank):
        actions = []
        counters = {}  # (stage_index, computation_type) -> mb_index
        weight_queue = []  # Queue of (stage_index, mb_index) for pending weight actions

        num_ranks = self.pp_group_size
        num_chunks = self._n_microbatches

        rank_to_stages = generate_rank_to_stage_mapping(
            num_ranks, num_ranks * 2, style="v"
        )
        stage0_index, stage1_index = rank_to_stages[rank]

        def increment_backward_counts(stage_index):
            """Helper method to increment BACKWARD_INPUT and BACKWARD_WEIGHT counters when FULL_BACKWARD is used."""
            input_key = (stage_index, BACKWARD_INPUT)
            weight_key = (stage_index, BACKWARD_WEIGHT)
            counters[input_key] = counters.get(input_key, 0) + 1
            counters[weight_key] = counters.get(weight_key, 0) + 1

        def add_overlap_f_b(actions, forward_stage, backward_stage):
            """Helper method to add an overlapped forward+backward action which tracks microbatch index."""
            forward_key = (forward_stage, FORWARD)
            backward_key = (backward_stage, BACKWARD_INPUT)

            forward_mb = counters.get(forward_key, 0)
            backward_mb = counters.get(backward_key, 0)

            sub_actions = (
                _Action(forward_stage, FORWARD, forward_mb),
                _Action(backward_stage, FULL_BACKWARD, backward_mb),
            )
            actions.append(_Action(-1, OVERLAP_F_B, None, sub_actions))

            # Update counters for sub_actions
            counters[forward_key] = forward_mb + 1
            increment_backward_counts(backward_stage)

        def add_action(actions, stage_index, computation_type):
            # Regular single action, for FULL_BACKWARD we only use the BACKWARD_INPUT counter
            key = (
                (stage_index, computation_type)
                if computation_type != FULL_BACKWARD
                else (stage_index, BACKWARD_INPUT)
            )
            mb_index = counters.get(key, 0)
            actions.append(_Action(stage_index, computation_type, mb_index))

            # If FULL_BACKWARD is used, just increment the separate BACKWARD_INPUT and BACKWARD_WEIGHT counters
            if computation_type == FULL_BACKWARD:
                increment_backward_counts(stage_index)
            else:
                # If BACKWARD_INPUT is updated, add corresponding weight action to queue
                if computation_type == BACKWARD_INPUT:
                    # Add weight action to queue for later processing
                    weight_queue.append((stage_index, mb_index))
                counters[key] = mb_index + 1

        def add_weight_action_if_pending(actions):
            """Helper method to add a weight action from the queue."""
            if not weight_queue:
                return  # No pending weight actions, skip
            # Pop the oldest weight action from the queue
            actual_stage_index, weight_mb_index = weight_queue.pop(0)
            actions.append(
                _Action(
                    actual_stage_index,
                    BACKWARD_WEIGHT,
                    weight_mb_index,
                )
            )
            # Update the counter for the actual stage that was processed
            weight_key = (actual_stage_index, BACKWARD_WEIGHT)
            counters[weight_key] = counters.get(weight_key, 0) + 1

        # Step 1: F0
        step_1 = (num_ranks - rank - 1) * 2
        for _ in range(step_1):
            add_action(actions, stage0_index, FORWARD)

        # Step 2: F0F1
        step_2 = rank + 1
        for _ in range(step_2):
            add_action(actions, stage0_index, FORWARD)
            add_action(actions, stage1_index, FORWARD)

        # Step 3: I1W1F1 (Use zero bubble)
        step_3 = num_ranks - rank - 1
        for _ in range(step_3):
            add_action(actions, stage1_index, BACKWARD_INPUT)
            add_weight_action_if_pending(actions)
            add_action(actions, stage1_index, FORWARD)

        # Step 4 (Main step): F0B1-F1B0 (combined, overlapped forward+backward)
        step_4 = num_chunks - num_ranks * 2 + rank + 1
        for i in range(step_4):
            if i == 0 and rank == num_ranks - 1:
                # NOTE: We don't overlap these two chunks to further reduce bubble size.
                add_action(actions, stage0_index, FORWARD)
                add_action(actions, stage1_index, FULL_BACKWARD)
            else:
                add_overlap_f_b(
                    actions,
                    forward_stage=stage0_index,
                    backward_stage=stage1_index,
                )
            add_overlap_f_b(
                actions,
                forward_stage=stage1_index,
                backward_stage=stage0_index,
            )

        # Step 5: B1-F1B0
        step_5 = num_ranks - rank - 1
        for _ in range(step_5):
            add_action(actions, stage1_index, FULL_BACKWARD)
            add_overlap_f_b(
                actions,
                forward_stage=stage1_index,
                backward_stage=stage0_index,
            )

        # Step 6: B1B0 (The second half of the chunks use zero bubble)
        step_6 = rank + 1
        enable_zb = False
        for i in range(step_6):
            if i == step_6 // 2 and rank % 2 == 1:
                enable_zb = True
            comp_type = BACKWARD_INPUT if enable_zb else FULL_BACKWARD
            add_action(actions, stage1_index, comp_type)
            if i == step_6 // 2 and rank % 2 == 0:
                enable_zb = True
            comp_type = BACKWARD_INPUT if enable_zb else FULL_BACKWARD
            add_action(actions, stage0_index, comp_type)

        # Step 7: W0B0
        step_7 = num_ranks - rank - 1
        for _ in range(step_7):
            add_weight_action_if_pending(actions)
            comp_type = BACKWARD_INPUT if enable_zb else FULL_BACKWARD
            add_action(actions, stage0_index, comp_type)

        # Step 8: W0
        step_8 = rank + 1
        for _ in range(step_8):
            add_weight_action_if_pending(actions)

        return actions

    def stage_to_rank(self):
        return generate_stage_to_rank_mapping(self.pp_group_size, self._num_stages, "v")


# ---- _validate_schedule (the counting part) ---------------------------------

def validate(order, num_stages, num_microbatches, stage_to_rank):
    """Every stage: M forwards, I and W in equal numbers, B + I = M backwards,
    each stage on the rank the schedule's mapping gives it, F before its
    backward and I before its W on that rank."""
    seen = {s: {F: set(), B: set(), I: set(), W: set()} for s in range(num_stages)}
    for rank, actions in order.items():
        for action in actions:
            if action is None:
                continue
            leaves = action.sub_actions if action.sub_actions is not None else (action,)
            for a in leaves:
                s, t, m = a.stage_index, a.computation_type, a.microbatch_index
                if stage_to_rank[s] != rank:
                    raise AssertionError(f"{a} on rank {rank}, its stage is on {stage_to_rank[s]}")
                if t in (B, I) and m not in seen[s][F]:
                    raise AssertionError(f"{a} before its forward")
                if t == W and m not in seen[s][I]:
                    raise AssertionError(f"{a} before its backward-input")
                if m in seen[s][t]:
                    raise AssertionError(f"{a} twice")
                seen[s][t].add(m)
    for s, kinds in seen.items():
        f, b, i, w = (len(kinds[t]) for t in (F, B, I, W))
        if f != num_microbatches or i != w or b + i != num_microbatches:
            raise AssertionError(f"stage {s}: F={f} B={b} I={i} W={w}")


# ---- shapes and files ---------------------------------------------------------

SCHEDULES = {"LoopedBFS": LoopedBFS, "DualPipeV": DualPipeV}

# (name, ranks, stages per rank, microbatches)
SHAPES = [
    ("LoopedBFS", 1, 2, 3), ("LoopedBFS", 2, 1, 3), ("LoopedBFS", 2, 2, 2),
    ("LoopedBFS", 2, 2, 4), ("LoopedBFS", 2, 3, 3), ("LoopedBFS", 3, 2, 5),
    ("LoopedBFS", 4, 2, 8), ("LoopedBFS", 4, 3, 6), ("LoopedBFS", 4, 1, 4),
    ("LoopedBFS", 8, 2, 16),
    ("DualPipeV", 1, 2, 2), ("DualPipeV", 1, 2, 5), ("DualPipeV", 2, 2, 4),
    ("DualPipeV", 2, 2, 5), ("DualPipeV", 2, 2, 8), ("DualPipeV", 3, 2, 6),
    ("DualPipeV", 3, 2, 7), ("DualPipeV", 4, 2, 8), ("DualPipeV", 4, 2, 10),
    ("DualPipeV", 4, 2, 13), ("DualPipeV", 5, 2, 12), ("DualPipeV", 8, 2, 16),
    ("DualPipeV", 8, 2, 21),
]


def pipeline_order(name, ranks, stages_per_rank, microbatches):
    schedule = SCHEDULES[name](ranks, stages_per_rank, microbatches)
    order = {r: schedule._calculate_single_rank_operations(r) for r in range(ranks)}
    validate(order, ranks * stages_per_rank, microbatches, schedule.stage_to_rank())
    return order


def rows_of(order):
    """One row of cells per rank, idle slots (None) left out."""
    return [[str(a) for a in order[r] if a is not None] for r in sorted(order)]


def write_csv(path, rows):
    with open(path, "w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows(rows)


def read_csv(path):
    with open(path, newline="") as f:
        return [[cell.strip() for cell in row if cell.strip()] for row in csv.reader(f)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="directory for the golden CSVs")
    parser.add_argument("--check", help="a CSV to compare with --check-shape")
    parser.add_argument("--check-shape", help="NAME,P,V,M of the schedule --check should be")
    args = parser.parse_args()
    if args.out:
        for name, p, v, m in SHAPES:
            path = os.path.join(args.out, f"{name}_p{p}_v{v}_m{m}.csv")
            write_csv(path, rows_of(pipeline_order(name, p, v, m)))
            print(path)
    if args.check:
        name, p, v, m = args.check_shape.split(",")
        want = rows_of(pipeline_order(name, int(p), int(v), int(m)))
        got = read_csv(args.check)
        if got != want:
            print(f"{args.check} differs from {name} P={p} V={v} M={m}", file=sys.stderr)
            return 1
        print(f"{args.check} is {name} P={p} V={v} M={m}")
    if not args.out and not args.check:
        parser.error("give --out DIR and/or --check FILE --check-shape NAME,P,V,M")
    return 0


if __name__ == "__main__":
    sys.exit(main())
