"""BenchmarkPythonBookkeeping's driver: Ray Tune's bookkeeping-overhead
release test with a Python function trainable. Each trial sleeps (the
simulated training work), reports once and returns; numpy is imported at
the top and the trainable uses it, so each trial's process has numpy
loaded, as a real trainable would. The report carries the time of the
trainable's first line ("t0", time.time()).

Usage: bookkeeping.py NAME STORAGE TRIALS WORK_S SLOTS REUSE
(REUSE: "default" leaves TuneConfig.reuse_actors unset, "false" sets it to
False). Prints one line "RESULT {json}": Fit's wall time (around
tuner.fit() only, so the interpreter's and the imports' start is not in
it), the trials by status, how many reported exactly once and when Fit
began (time.time()).
"""

import numpy as np

import collections
import json
import sys
import time

from tunejet import train, tune

name, storage, trials, work, slots, reuse = sys.argv[1:7]
trials, work, slots = int(trials), float(work), int(slots)


def sleeper(config):
    t0 = time.time()  # the trainable's first line, for the benchmark's split
    time.sleep(work)
    train.report({"t0": t0, "score": float(np.float64(config["x"]))})


tune_config = tune.TuneConfig(num_samples=trials, max_concurrent_trials=slots)
if reuse == "false":
    tune_config.reuse_actors = False
tuner = tune.Tuner(
    sleeper,
    param_space={"x": tune.uniform(0, 1)},
    tune_config=tune_config,
    run_config=train.RunConfig(name=name, storage_path=storage, verbose=0),
)
fit_start = time.time()
start = time.monotonic()
grid = tuner.fit()
wall = time.monotonic() - start
statuses = collections.Counter(r.status for r in grid)
once = sum(1 for r in grid if r.metrics.get("training_iteration") == 1)
print("RESULT " + json.dumps({"wall_s": wall, "trials": len(grid), "statuses": statuses, "reported_once": once, "fit_start": fit_start}))
