# Ray Tune example: the "Trial-level fault tolerance" section of Ray's guide
# "How to Enable Fault Tolerance in Ray Tune" (doc/source/tune/tutorials/
# tune-fault-tolerance.rst): a checkpointing function trainable run with
# FailureConfig(max_failures=...), whose retries resume from the latest
# checkpoint. The crash is made deterministic (the first attempt of every
# trial fails at epoch 3) instead of random.
#
# Written against Ray's API; for tunejet only the imports changed:
#   from ray import train, tune  ->  from tunejet import train, tune
import json
import os
import tempfile

from tunejet import train, tune


def trainable(config):
    # Checkpoint loading
    checkpoint = train.get_checkpoint()
    start = 1
    if checkpoint:
        with checkpoint.as_directory() as checkpoint_dir:
            with open(os.path.join(checkpoint_dir, "checkpoint.json"), "r") as f:
                state = json.load(f)
            start = state["epoch"] + 1

    for epoch in range(start, config["num_epochs"] + 1):
        if epoch == 3 and checkpoint is None:
            raise RuntimeError("simulated crash at epoch %d" % epoch)

        # Checkpoint saving
        with tempfile.TemporaryDirectory() as temp_checkpoint_dir:
            with open(os.path.join(temp_checkpoint_dir, "checkpoint.json"), "w") as f:
                json.dump({"epoch": epoch}, f)
            train.report(
                {"epoch": epoch, "score": epoch * config["lr"]},
                checkpoint=train.Checkpoint.from_directory(temp_checkpoint_dir),
            )


tuner = tune.Tuner(
    trainable,
    param_space={"num_epochs": 5, "lr": tune.grid_search([0.1, 0.2])},
    run_config=train.RunConfig(
        storage_path=os.path.expanduser("~/ray_results"),
        name="trial_fault_tolerance",
        failure_config=train.FailureConfig(max_failures=3),
    ),
)
results = tuner.fit()
print("Errors:", results.num_errors, "Terminated:", results.num_terminated)
