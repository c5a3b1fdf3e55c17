"""A toy command trainable for tunejet: minimize (w - 3)^2 by gradient descent.

The trial config gives the starting point ``x`` and the learning rate ``lr``.
Each of ITERATIONS steps reports the loss; every CHECKPOINT_EVERY steps the
report carries a checkpoint (a directory with state.json). When the attempt
resumes from a checkpoint (after a failure, or on a restored experiment),
training continues from the step and weight saved in it.

Run it through tunejet (see README.md); it uses sdk/python/tunejet from
this repository without installing anything.
"""

import json
import os
import random
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "sdk", "python"))
import tunejet  # noqa: E402

ITERATIONS = 10
CHECKPOINT_EVERY = 3
TARGET = 3.0


def load_state(checkpoint_dir, config):
    """Return (step, w): from the checkpoint when resuming, else fresh."""
    if checkpoint_dir is None:
        return 0, float(config["x"])
    with open(os.path.join(checkpoint_dir, "state.json")) as f:
        state = json.load(f)
    return state["step"], state["w"]


def main():
    config = tunejet.get_config()
    lr = float(config["lr"])
    step, w = load_state(tunejet.get_checkpoint(), config)
    rng = random.Random("%s-%d" % (tunejet.get_trial_id(), step))
    while step < ITERATIONS:
        step += 1
        w -= lr * 2 * (w - TARGET)  # one gradient step on (w - 3)^2
        loss = (w - TARGET) ** 2 + rng.gauss(0, 0.01)
        metrics = {"loss": loss, "w": w, "step": step}
        time.sleep(0.05)  # pretend to work
        if step % CHECKPOINT_EVERY == 0 or step == ITERATIONS:
            # The runner copies the directory before report returns, so a
            # temporary directory is fine: it is deleted right after.
            with tempfile.TemporaryDirectory() as ckpt:
                with open(os.path.join(ckpt, "state.json"), "w") as f:
                    json.dump({"step": step, "w": w}, f)
                tunejet.report(metrics, checkpoint_dir=ckpt)
        else:
            tunejet.report(metrics)


if __name__ == "__main__":
    main()
