# Covers Ray's python/ray/tune/examples/asha_example.py and the
# "Tune Trial Schedulers" page (doc/source/tune/api/schedulers.rst):
# ASHAScheduler stops the trials that fall behind at its rungs, and the
# best trial runs to max_t.
#
# Ray's API; for tunejet only the imports changed:
#   from ray import train, tune                 ->  from tunejet import train, tune
#   from ray.tune.schedulers import ASHAScheduler
#       ->  from tunejet.tune.schedulers import ASHAScheduler
import time

from tunejet import train, tune
from tunejet.tune.schedulers import ASHAScheduler

MAX_T = 9


def trainable(config):
    for step in range(1, MAX_T + 1):
        time.sleep(0.05)  # a step of training takes a while
        # A loss that falls with each step, faster with a larger lr.
        loss = 1.0 / (1 + config["lr"] * step)
        train.report({"loss": loss})


if __name__ == "__main__":
    scheduler = ASHAScheduler(max_t=MAX_T, grace_period=1, reduction_factor=3)
    tuner = tune.Tuner(
        trainable,
        # Best first, one at a time: each later trial meets the rungs the
        # earlier ones recorded.
        param_space={"lr": tune.grid_search([100.0, 10.0, 1.0, 0.1, 0.01, 0.001])},
        tune_config=tune.TuneConfig(metric="loss", mode="min", scheduler=scheduler, max_concurrent_trials=1),
    )
    results = tuner.fit()

    iterations = {r.config["lr"]: r.metrics["training_iteration"] for r in results}
    assert results.num_errors == 0
    # The scheduler stopped some trials before max_t ...
    assert min(iterations.values()) < MAX_T, iterations
    # ... and the best one ran to the end.
    best = results.get_best_result()
    assert best.config["lr"] == 100.0, best.config
    assert iterations[100.0] == MAX_T, iterations
    print("iterations by lr:", dict(sorted(iterations.items())))
