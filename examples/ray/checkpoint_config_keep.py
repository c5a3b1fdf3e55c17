# Covers Ray's "How to Save and Load Trial Checkpoints"
# (doc/source/tune/tutorials/tune-trial-checkpoints.rst): CheckpointConfig
# keeps the best num_to_keep checkpoints by checkpoint_score_attribute,
# Result.checkpoint is the latest and Result.best_checkpoints the kept ones.
#
# Ray's API; for tunejet only the imports changed:
#   from ray import train, tune        ->  from tunejet import train, tune
#   from ray.train import Checkpoint   ->  from tunejet.train import Checkpoint
import json
import os
import tempfile

from tunejet import train, tune
from tunejet.train import Checkpoint

# The score each step reports: the best are steps 2 and 4.
SCORES = [0.1, 0.5, 0.9, 0.2, 0.8, 0.3]


def trainable(config):
    for step, score in enumerate(SCORES):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "step.json"), "w") as f:
                json.dump({"step": step}, f)
            train.report({"score": score, "step": step}, checkpoint=Checkpoint.from_directory(d))


def step_of(checkpoint):
    with checkpoint.as_directory() as d, open(os.path.join(d, "step.json")) as f:
        return json.load(f)["step"]


if __name__ == "__main__":
    tuner = tune.Tuner(
        trainable,
        run_config=train.RunConfig(
            checkpoint_config=train.CheckpointConfig(
                num_to_keep=2, checkpoint_score_attribute="score", checkpoint_score_order="max"
            )
        ),
    )
    results = tuner.fit()

    (r,) = list(results)
    assert r.error is None
    kept = sorted(step_of(c) for c, _ in r.best_checkpoints)
    assert kept == [2, 4], kept
    print("kept checkpoints of steps", kept)
