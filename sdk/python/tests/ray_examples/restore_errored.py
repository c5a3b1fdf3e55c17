# Ray Tune example: the "Restore a Tune experiment" section of Ray's guide
# "How to Enable Fault Tolerance in Ray Tune" (doc/source/tune/tutorials/
# tune-fault-tolerance.rst): an experiment whose trials error is continued
# with Tuner.restore(path, trainable=..., resume_errored=True), guarded by
# Tuner.can_restore. Every trial here fails once, on its first attempt, at
# epoch 3 (max_failures=0, so the first fit() ends with every trial in
# ERROR); resumed, each continues from its latest checkpoint.
#
# Written against Ray's API; for tunejet only the imports changed:
#   from ray import train, tune  ->  from tunejet import train, tune
import json
import os
import tempfile

from tunejet import train, tune


def train_fn(config):
    checkpoint = train.get_checkpoint()
    start = 1
    if checkpoint:
        with checkpoint.as_directory() as checkpoint_dir:
            with open(os.path.join(checkpoint_dir, "checkpoint.json")) as f:
                start = json.load(f)["epoch"] + 1

    for epoch in range(start, config["num_epochs"] + 1):
        if epoch == 3 and checkpoint is None:
            raise RuntimeError("this trial fails once, at epoch %d" % epoch)
        with tempfile.TemporaryDirectory() as temp_checkpoint_dir:
            with open(os.path.join(temp_checkpoint_dir, "checkpoint.json"), "w") as f:
                json.dump({"epoch": epoch}, f)
            train.report(
                {"epoch": epoch, "loss": config["x"] / epoch},
                checkpoint=train.Checkpoint.from_directory(temp_checkpoint_dir),
            )


storage_path = os.path.expanduser("~/ray_results")
exp_name = "tune_fault_tolerance_guide"
path = os.path.join(storage_path, exp_name)

if tune.Tuner.can_restore(path):
    tuner = tune.Tuner.restore(path, trainable=train_fn, resume_errored=True)
else:
    tuner = tune.Tuner(
        train_fn,
        param_space={"num_epochs": 4, "x": tune.grid_search([1.0, 2.0])},
        tune_config=tune.TuneConfig(metric="loss", mode="min"),
        run_config=train.RunConfig(storage_path=storage_path, name=exp_name),
    )
result_grid = tuner.fit()
print("Errors:", result_grid.num_errors, "Terminated:", result_grid.num_terminated)

if result_grid.errors:
    # As the guide does after an interruption: continue the same experiment.
    tuner = tune.Tuner.restore(path, trainable=train_fn, resume_errored=True)
    result_grid = tuner.fit()
    print("After restore: Errors:", result_grid.num_errors, "Terminated:", result_grid.num_terminated)
    print("Best config:", result_grid.get_best_result().config)
