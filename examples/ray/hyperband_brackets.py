# Covers Ray's python/ray/tune/examples/hyperband_function_example.py:
# HyperBandScheduler (synchronous successive halving) over a function
# trainable; the best trial runs longest.
#
# Ray's API; for tunejet only the imports changed:
#   from ray import train, tune                      ->  from tunejet import train, tune
#   from ray.tune.schedulers import HyperBandScheduler
#       ->  from tunejet.tune.schedulers import HyperBandScheduler
import time

from tunejet import train, tune
from tunejet.tune.schedulers import HyperBandScheduler

MAX_T = 9


def train_fn(config):
    for step in range(1, MAX_T + 1):
        time.sleep(0.05)  # a step of training takes a while
        train.report({"episode_reward_mean": config["quality"] * step})


if __name__ == "__main__":
    hyperband = HyperBandScheduler(max_t=MAX_T, reduction_factor=3)
    tuner = tune.Tuner(
        train_fn,
        param_space={"quality": tune.grid_search([1, 2, 3, 4, 5, 6, 7, 8, 9])},
        tune_config=tune.TuneConfig(metric="episode_reward_mean", mode="max", scheduler=hyperband),
    )
    results = tuner.fit()

    assert results.num_errors == 0
    iterations = {r.config["quality"]: r.metrics["training_iteration"] for r in results}
    assert min(iterations.values()) < MAX_T, iterations
    best = results.get_best_result()
    assert best.config["quality"] == 9, best.config
    print("iterations by quality:", dict(sorted(iterations.items())))
