"""A learning curve for ASHA to judge: one trial trains a model whose loss
after t epochs is branin(x1, x2) + 20 (1 + x2/15) t^-0.7.

Configs that end best are not always ahead early (the t^-0.7 term is larger
for larger x2), which is what early stopping has to get right. Each epoch
reports ``loss`` and saves a checkpoint (the epoch), so a trial that fails
or is restored resumes where it was. When ASHA stops the trial, report()
exits the process (status 0) and the trial ends TERMINATED with ASHA's
reason.

Run it through tunejet (see README.md); it uses sdk/python/tunejet from
this repository without installing anything.
"""

import json
import math
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "sdk", "python"))
import tunejet  # noqa: E402

EPOCHS = 27
EPOCH_SECONDS = float(os.environ.get("EPOCH_SECONDS", "0.05"))


def branin(x1, x2):
    b, c = 5.1 / (4 * math.pi ** 2), 5 / math.pi
    t = 1 / (8 * math.pi)
    return (x2 - b * x1 ** 2 + c * x1 - 6) ** 2 + 10 * (1 - t) * math.cos(x1) + 10


def main():
    config = tunejet.get_config()
    x1, x2 = float(config["x1"]), float(config["x2"])
    epoch = 0
    resume = tunejet.get_checkpoint()
    if resume is not None:
        with open(os.path.join(resume, "state.json")) as f:
            epoch = json.load(f)["epoch"]
    while epoch < EPOCHS:
        epoch += 1
        time.sleep(EPOCH_SECONDS)  # pretend to train one epoch
        loss = branin(x1, x2) + 20 * (1 + x2 / 15) * epoch ** -0.7
        with tempfile.TemporaryDirectory() as ckpt:
            with open(os.path.join(ckpt, "state.json"), "w") as f:
                json.dump({"epoch": epoch}, f)
            tunejet.report({"loss": loss}, checkpoint_dir=ckpt)


if __name__ == "__main__":
    main()
