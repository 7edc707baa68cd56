#!/usr/bin/env python3
"""The freeze LP through native HiGHS, for bench-solvers' "highs" and
"scipy" rows (bench_pylp.h).

    python solve_lp.py highs|scipy MODEL.lp

MODEL.lp is written by bench_pylp.c in CPLEX LP format: minimise T, the
ratio columns named r0 .. r<k-1>, a first comment line "\\ ratios K".  Both
solve the two lexicographic stages as the other solvers do: least batch time
T*, then least total ratio with T <= T* (relaxed by 1e-9 relative if
round-off leaves that infeasible).

  highs  HiGHS through its Python interface, highspy: the model read from
         the file, the second stage warm-started from the first's basis.
  scipy  scipy.optimize.linprog(method="highs") (SciPy's own copy of HiGHS)
         on the same model as sparse matrices (read by highspy: the timed
         part is linprog's); each stage solved from scratch, as linprog
         takes no starting basis.

Prints "ok SECONDS T*" (SECONDS: the time spent in the solver's calls over
both stages) and then the K ratios, one per line; or "error MESSAGE" and
exit status 1.  Only the result goes to stdout (HiGHS's banner goes to
stderr), so that bench-solvers can parse it.
"""
import os
import re
import sys
import time


def fail(out, message):
    out.write(f"error {message}\n")
    out.flush()
    sys.exit(1)


def read_model(path):
    """(highspy.Highs with the model, K ratio columns, T's column, the
    ratio columns)."""
    import highspy
    with open(path, encoding="utf-8") as f:
        header = re.match(r"\\ ratios (\d+)", f.readline())
    if not header:
        raise ValueError(f'{path}: no "\\ ratios K" first line')
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    if h.readModel(path) != highspy.HighsStatus.kOk:
        raise ValueError(f"{path}: HiGHS cannot read it")
    k = int(header.group(1))
    column = lambda name: h.getColByName(name)[1]  # noqa: E731
    return h, k, column("T"), [column(f"r{j}") for j in range(k)]


def solve_highs(h, t, ratios):
    """Both stages in highspy; returns (seconds, T*, column values)."""
    import highspy
    seconds = 0.0

    def run():
        nonlocal seconds
        started = time.perf_counter()
        h.run()
        seconds += time.perf_counter() - started
        return h.getModelStatus() == highspy.HighsModelStatus.kOptimal

    if not run():
        raise RuntimeError("HiGHS: not optimal while minimising the batch time")
    best = h.getSolution().col_value[t]
    if ratios:
        h.changeColCost(t, 0.0)
        for j in ratios:
            h.changeColCost(j, 1.0)
        h.changeColBounds(t, 0.0, best)
        if not run():
            h.changeColBounds(t, 0.0, best + 1e-9 * max(1.0, abs(best)))
            if not run():
                raise RuntimeError("HiGHS: not optimal while minimising the total freeze ratio")
    return seconds, best, list(h.getSolution().col_value)


def solve_scipy(h, t, ratios):
    """Both stages with scipy.optimize.linprog(method="highs") on the model
    h holds; returns (seconds, T*, column values)."""
    import numpy as np
    from scipy.optimize import linprog
    from scipy.sparse import csc_matrix, vstack
    lp = h.getLp()
    a = lp.a_matrix_
    matrix = csc_matrix((np.array(a.value_), np.array(a.index_), np.array(a.start_)),
                        shape=(lp.num_row_, lp.num_col_)).tocsr()
    lower, upper = np.array(lp.row_lower_), np.array(lp.row_upper_)
    # linprog takes A_ub x <= b_ub: a row's finite lower bound l is -a x <= -l.
    has_lower, has_upper = np.isfinite(lower), np.isfinite(upper)
    a_ub = vstack([-matrix[has_lower], matrix[has_upper]]).tocsr()
    b_ub = np.concatenate([-lower[has_lower], upper[has_upper]])
    bounds = np.column_stack([lp.col_lower_, lp.col_upper_])
    bounds[~np.isfinite(bounds)] = np.nan              # linprog: None/NaN is no bound
    seconds = 0.0

    def run(cost, col_bounds):
        nonlocal seconds
        started = time.perf_counter()
        result = linprog(cost, A_ub=a_ub, b_ub=b_ub, bounds=col_bounds, method="highs")
        seconds += time.perf_counter() - started
        return result if result.status == 0 else None

    first = run(np.array(lp.col_cost_), bounds)
    if first is None:
        raise RuntimeError("SciPy linprog: not optimal while minimising the batch time")
    best, x = first.x[t], first.x
    if ratios:
        cost = np.zeros(lp.num_col_)
        cost[ratios] = 1.0
        for slack in (0.0, 1e-9 * max(1.0, abs(best))):
            capped = bounds.copy()
            capped[t] = (0.0, best + slack)
            second = run(cost, capped)
            if second is not None:
                break
        else:
            raise RuntimeError("SciPy linprog: not optimal while minimising the total freeze "
                               "ratio")
        x = second.x
    return seconds, best, list(x)


def main(argv):
    # HiGHS prints a banner on stdout when it starts: keep stdout for the
    # result alone.
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    if len(argv) != 3 or argv[1] not in ("highs", "scipy"):
        fail(out, "usage: solve_lp.py highs|scipy MODEL.lp")
    try:
        h, k, t, ratios = read_model(argv[2])
        solve = solve_highs if argv[1] == "highs" else solve_scipy
        seconds, best, x = solve(h, t, ratios)
    except (OSError, ValueError, RuntimeError, ImportError) as e:
        fail(out, str(e))
    values = [repr(float(x[j])) for j in ratios]
    out.write("\n".join([f"ok {seconds!r} {float(best)!r}"] + values) + "\n")
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
