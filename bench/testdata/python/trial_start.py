"""BenchmarkPythonTrialStart's driver: trials that report once, at once,
one at a time (max_concurrent_trials=1), so that nothing queues. The
trainable reports the wall clock at its first line ("t0", time.time()),
which splits a trial's start into the process's start (up to the
trainable's first line) and the report's way to the runner.

Usage: trial_start.py NAME STORAGE TRIALS REUSE (REUSE: "default" or
"false", as bookkeeping.py). Prints "RESULT {json}" with the trials by
status.
"""

import numpy as np

import collections
import json
import sys
import time

from tunejet import train, tune

name, storage, trials, reuse = sys.argv[1:5]


def first_report(config):
    t0 = time.time()
    train.report({"t0": t0, "score": float(np.float64(config["x"]))})


tune_config = tune.TuneConfig(num_samples=int(trials), max_concurrent_trials=1)
if reuse == "false":
    tune_config.reuse_actors = False
grid = tune.Tuner(
    first_report,
    param_space={"x": tune.uniform(0, 1)},
    tune_config=tune_config,
    run_config=train.RunConfig(name=name, storage_path=storage, verbose=0),
).fit()
print("RESULT " + json.dumps({"trials": len(grid), "statuses": collections.Counter(r.status for r in grid)}))
