"""A trainable whose best learning rate falls as training goes on, for PBT.

The model is SGD on the noisy quadratic f(w) = w^2 / 2, whose gradient
carries noise of variance NOISE. Its state is the expected squared distance
to the optimum, loss = E[w^2], and one SGD step at learning rate lr moves it
to (1 - lr)^2 loss + lr^2 NOISE. The best rate for the next step is
loss / (loss + NOISE) (Schaul, Zhang and LeCun 2013, "No More Pesky
Learning Rates", section 2): large at first, then ever smaller. A fixed lr
either stalls at its noise floor or converges slowly; after 300 steps the
best fixed lr ends at 3.2 times the loss of the best schedule.

Each iteration runs STEPS steps, waits ITERATION_SECONDS (so that trials
train side by side, as real ones do), reports ``loss`` and saves a
checkpoint: the loss and the iteration. When PBT has the trial exploit
another, the trial restarts with a new config from the other's checkpoint:
get_checkpoint() is then the donor's, and training goes on from the donor's
loss and iteration at the new lr. internal/sched/pbt_regret_test.go studies
the same problem.

Run it through tunejet (see README.md); it uses sdk/python/tunejet.py from
this repository without installing anything.
"""

import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "sdk", "python"))
import tunejet  # noqa: E402

NOISE = 0.01  # variance of the gradient's noise
STEPS = 10  # SGD steps per iteration
ITERATIONS = 30  # run_config.stop ends the trial here too
ITERATION_SECONDS = float(os.environ.get("ITERATION_SECONDS", "0.05"))


def main():
    lr = float(tunejet.get_config()["lr"])
    loss, iteration = 1.0, 0
    resume = tunejet.get_checkpoint()
    if resume is not None:
        with open(os.path.join(resume, "state.json")) as f:
            state = json.load(f)
        loss, iteration = state["loss"], state["iteration"]
    while iteration < ITERATIONS:
        iteration += 1
        for _ in range(STEPS):
            loss = (1 - lr) ** 2 * loss + lr ** 2 * NOISE
        time.sleep(ITERATION_SECONDS)  # pretend the steps took a while
        with tempfile.TemporaryDirectory() as ckpt:
            with open(os.path.join(ckpt, "state.json"), "w") as f:
                json.dump({"loss": loss, "iteration": iteration}, f)
            # attempt: the process, which a pause or an exploit replaces
            tunejet.report({"loss": loss, "lr": lr, "attempt": tunejet.get_attempt()}, checkpoint_dir=ckpt)


if __name__ == "__main__":
    main()
