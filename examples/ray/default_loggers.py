# Covers Ray's default loggers (python/ray/tune/logger: JsonLoggerCallback,
# CSVLoggerCallback, TBXLoggerCallback, and doc/source/tune/tutorials/tune-output.rst):
# every trial folder holds params.json, result.json, progress.csv and a
# TensorBoard event file, so `tensorboard --logdir` reads the experiment.
#
# Ray's API; for tunejet only the imports changed:
#   from ray import train, tune  ->  from tunejet import train, tune
import csv
import glob
import json
import os

from tunejet import train, tune


def trainable(config):
    for step in range(4):
        train.report({"loss": config["x"] / (step + 1)})


if __name__ == "__main__":
    results = tune.Tuner(trainable, param_space={"x": tune.grid_search([1.0, 2.0])}).fit()

    for r in results:
        with open(os.path.join(r.path, "params.json")) as f:
            assert json.load(f) == r.config
        with open(os.path.join(r.path, "result.json")) as f:
            rows = [json.loads(line) for line in f]
        assert [row["training_iteration"] for row in rows] == [1, 2, 3, 4], rows
        with open(os.path.join(r.path, "progress.csv")) as f:
            assert len(list(csv.DictReader(f))) == 4
        events = glob.glob(os.path.join(r.path, "events.out.tfevents.*"))
        assert len(events) == 1 and os.path.getsize(events[0]) > 0, events
    print("params.json, result.json, progress.csv and a TensorBoard file in each trial folder")
