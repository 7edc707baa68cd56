"""The accuracy study behind tools/accuracy-study: what a freeze plan costs
in accuracy when fine-tuning, against no freezing and the naive baselines.

  studies   the two studies (their pipelines, models, sizes and arms) and
            the tf-exec options of each arm
  data      the data files of the text study, built from Debian's own files,
            and the training windows each seed draws
  predict   predicted batch times: the schedule's DAG under an arm's ratios
  summary   logs in, targets, per-arm figures and the CSVs out
  plot      the validation-loss chart (SVG)

Only the Python standard library (and tools/python's timelyfreeze_plan for
the random streams).
"""
import os as _os
import sys as _sys

# The executor's random streams and phases, as tools/python mirrors them.
_sys.path.insert(0, _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), "..", "python"))
