"""Predicted batch times: what the profile's time model says a step takes
under an arm's freeze ratios.

The DAG and its longest path are tf-plan's (one copy of that mechanism):
the measured profile is rewritten so that every freezable action takes its
time at the arm's ratio, full and frozen alike (ms - r (ms - frozen_ms),
the LP's straight line), and tf-plan's unfrozen batch time of that profile
is then the longest path under those ratios.  Under the plan's own ratios
this must give the plan's batch time: the Predictor checks it.
"""
import copy
import json
import os
import subprocess
import tempfile

from timelyfreeze_plan import phase_factor


class PredictError(Exception):
    """tf-plan failed, or the replay does not reproduce the plan."""


class Predictor:
    """Batch times of one profile under given ratios, cached."""

    def __init__(self, tf_plan, profile_path):
        self.tf_plan = tf_plan
        with open(profile_path) as f:
            self.profile = json.load(f)
        self.cache = {}

    def batch_ms(self, ratios):
        """The batch time when backward (stage, microbatch) freezes
        ratios[(stage, microbatch)] (missing: 0)."""
        key = tuple(sorted(ratios.items()))
        if key not in self.cache:
            self.cache[key] = self._solve(ratios)
        return self.cache[key]

    def _solve(self, ratios):
        doc = copy.deepcopy(self.profile)
        for a in doc.get("actions", []):
            if "frozen_ms" in a:
                r = ratios.get((a["stage"], a["microbatch"]), 0.0)
                a["ms"] = a["frozen_ms"] = a["ms"] - r * (a["ms"] - a["frozen_ms"])
        with tempfile.TemporaryDirectory(prefix="accuracy-replay.") as tmp:
            src, dst = os.path.join(tmp, "profile.json"), os.path.join(tmp, "plan.json")
            with open(src, "w") as f:
                json.dump(doc, f)
            done = subprocess.run([self.tf_plan, src, "-o", dst, "-q"], capture_output=True,
                                  text=True)
            if done.returncode != 0:
                raise PredictError("tf-plan on the replay of the profile failed: %s"
                                   % done.stderr.strip())
            with open(dst) as f:
                return json.load(f)["batch_ms"]["unfrozen"]

    def check_against(self, plan_doc, ratios):
        """Raises PredictError unless the replay under the plan's ratios
        gives the plan's batch time (to 1e-6 relative)."""
        want = plan_doc["batch_ms"]["planned"]
        got = self.batch_ms(ratios)
        if abs(got - want) > 1e-6 * max(1.0, want):
            raise PredictError("the DAG under the plan's ratios takes %.6f ms, the plan "
                               "says %.6f ms" % (got, want))


def predicted_cumulative_ms(predictor, ratios, steps, warmup, ramp):
    """The predicted batch time summed over steps 1..n, for every n: the
    warm-up unfrozen, the ramp at its share of the ratios, then the full
    ratios (no optimizer: tf-plan leaves it out)."""
    total, out = 0.0, []
    for step in range(steps):
        f = phase_factor(step, warmup, ramp)
        total += predictor.batch_ms({k: f * r for k, r in ratios.items()})
        out.append(total)
    return out
