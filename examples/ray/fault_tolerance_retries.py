# Covers Ray's "How to Enable Fault Tolerance in Ray Tune" page
# (doc/source/tune/tutorials/tune-fault-tolerance.rst): FailureConfig's
# max_failures retries a trial that raised, from its latest checkpoint.
#
# Ray's API; for tunejet only the imports changed:
#   from ray import train, tune              ->  from tunejet import train, tune
#   from ray.train import Checkpoint         ->  from tunejet.train import Checkpoint
import json
import os
import tempfile

from tunejet import train, tune
from tunejet.train import Checkpoint


def trainable(config):
    start = 0
    checkpoint = train.get_checkpoint()
    if checkpoint:
        with checkpoint.as_directory() as d, open(os.path.join(d, "state.json")) as f:
            start = json.load(f)["epoch"] + 1
    for epoch in range(start, 6):
        if epoch == 3 and checkpoint is None:
            # The first attempt dies here; the retry starts from epoch 3.
            raise RuntimeError("the machine went away")
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "state.json"), "w") as f:
                json.dump({"epoch": epoch}, f)
            train.report({"epoch": epoch, "loss": 1.0 / (epoch + 1)}, checkpoint=Checkpoint.from_directory(d))


if __name__ == "__main__":
    tuner = tune.Tuner(
        trainable,
        param_space={"x": tune.grid_search([1, 2])},
        run_config=train.RunConfig(failure_config=train.FailureConfig(max_failures=2)),
    )
    results = tuner.fit()

    assert results.num_errors == 0
    for r in results:
        assert r.num_failures == 1, r
        # Epochs 0-2, the failure, then 3-5 from the checkpoint of epoch 2.
        assert [h["epoch"] for h in r.history()] == [0, 1, 2, 3, 4, 5], r.history()
        assert r.metrics["epoch"] == 5
    print("every trial failed once and resumed from its checkpoint")
