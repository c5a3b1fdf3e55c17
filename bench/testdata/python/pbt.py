"""BenchmarkPBTExploit's driver: Ray's pbt_function.py (the toy problem
whose best learning rate is a triangle wave of the accuracy;
python/ray/tune/examples/pbt_function.py at ray-project/ray e7e78a0) with
the imports changed, a checkpoint at every iteration (the example's
checkpoint_interval=1) kept two at a time by mean_accuracy as there, and
two changes: a fixed number of iterations (stop at training_iteration
ITERS, no "done" criterion) and a small sleep per iteration as its work.
The trainable reports the time of its first line ("t0") with every result.

Usage: pbt.py NAME STORAGE TRIALS ITERS WORK_S SCHEDULER [REPORTS]
(SCHEDULER: "pbt" or "fifo"). With REPORTS, a comma-separated list of one
count per trial (FIFO only), trial i makes exactly REPORTS[i] reports and
returns instead of stopping at ITERS: the same reports as a PBT run whose
trials made those, whose exploits repeat iterations. Prints
"RESULT {json}": Fit's wall time (around tuner.fit() only), the trials by
status and the reports in their histories.
"""

import numpy as np

import collections
import json
import os
import random
import sys
import tempfile
import time

from tunejet import train, tune
from tunejet.train import Checkpoint
from tunejet.tune.schedulers import PopulationBasedTraining

name, storage, trials, iters, work, scheduler = sys.argv[1:7]
trials, iters, work = int(trials), int(iters), float(work)
reports = [int(n) for n in sys.argv[7].split(",")] if len(sys.argv) > 7 else None


def pbt_function(config):
    t0 = time.time()  # the attempt's first line, for the benchmark's split
    lr = config["lr"]
    accuracy = 0.0
    step = 1
    checkpoint = train.get_checkpoint()
    if checkpoint:
        with checkpoint.as_directory() as d, open(os.path.join(d, "state.json")) as f:
            state = json.load(f)
        accuracy, step = state["acc"], state["step"] + 1

    midpoint = 100  # lr starts decreasing after acc > midpoint
    q_tolerance = 3  # penalize exceeding lr by more than this multiple
    noise_level = 2  # add gaussian noise to the acc increase
    while True:
        time.sleep(work)  # the iteration's training
        if accuracy < midpoint:
            optimal_lr = 0.01 * accuracy / midpoint
        else:
            optimal_lr = 0.01 - 0.01 * (accuracy - midpoint) / midpoint
        optimal_lr = min(0.01, max(0.001, optimal_lr))
        q_err = max(lr, optimal_lr) / min(lr, optimal_lr)
        if q_err < q_tolerance:
            accuracy += (1.0 / q_err) * random.random()
        elif lr > optimal_lr:
            accuracy -= (q_err - q_tolerance) * random.random()
        accuracy += noise_level * np.random.normal()
        accuracy = max(0, accuracy)
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "state.json"), "w") as f:
                json.dump({"acc": accuracy, "step": step}, f)
            train.report(
                {"mean_accuracy": accuracy, "cur_lr": lr, "optimal_lr": optimal_lr, "q_err": q_err, "t0": t0},
                checkpoint=Checkpoint.from_directory(d),
            )
        if step == config.get("reports"):
            return
        step += 1


pbt = None
if scheduler == "pbt":
    pbt = PopulationBasedTraining(
        time_attr="training_iteration",
        perturbation_interval=4,
        hyperparam_mutations={
            "lr": tune.uniform(0.0001, 0.02),
            "some_other_factor": [1, 2],
        },
    )
param_space = {"lr": 0.0001, "some_other_factor": 1}
num_samples = trials
if reports:
    assert scheduler == "fifo" and len(reports) == trials, "REPORTS: one count per trial, FIFO only"
    param_space["reports"] = tune.grid_search(reports)
    num_samples = 1
tuner = tune.Tuner(
    pbt_function,
    run_config=train.RunConfig(
        name=name,
        storage_path=storage,
        verbose=0,
        stop=None if reports else {"training_iteration": iters},
        failure_config=train.FailureConfig(fail_fast=True),
        checkpoint_config=train.CheckpointConfig(checkpoint_score_attribute="mean_accuracy", num_to_keep=2),
    ),
    tune_config=tune.TuneConfig(scheduler=pbt, metric="mean_accuracy", mode="max", num_samples=num_samples),
    param_space=param_space,
)
start = time.monotonic()
grid = tuner.fit()
wall = time.monotonic() - start
print("RESULT " + json.dumps({
    "wall_s": wall,
    "trials": len(grid),
    "statuses": collections.Counter(r.status for r in grid),
    "iterations": sorted(r.metrics.get("training_iteration", 0) for r in grid),
}))
