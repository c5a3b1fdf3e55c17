# Covers Ray's "How to Define Stopping Criteria for a Ray Tune Experiment"
# page (doc/source/tune/tutorials/tune-stopping.rst): a stop dict over
# several metrics (any one met stops the trial), a built-in stopper, and
# stoppers combined.
#
# Ray's API; for tunejet only the imports changed:
#   from ray import train, tune  ->  from tunejet import train, tune
#   from ray.tune.stopper import (CombinedStopper, MaximumIterationStopper, TrialPlateauStopper)
#       ->  from tunejet.tune.stopper import (...)
from tunejet import train, tune
from tunejet.tune.stopper import CombinedStopper, MaximumIterationStopper, TrialPlateauStopper


def climbing(config):
    acc = 0.0
    for _ in range(100):
        acc += config["speed"]
        train.report({"mean_accuracy": acc})


def plateau(config):
    for step in range(100):
        # Rises for a while, then stays flat.
        train.report({"loss": max(1.0 - 0.1 * step, config["floor"])})


if __name__ == "__main__":
    # A stop dict: the first criterion met ends the trial.
    tuner = tune.Tuner(
        climbing,
        param_space={"speed": tune.grid_search([0.01, 0.25])},
        run_config=train.RunConfig(stop={"training_iteration": 20, "mean_accuracy": 1.0}),
    )
    results = tuner.fit()
    by_speed = {r.config["speed"]: r.metrics for r in results}
    assert by_speed[0.01]["training_iteration"] == 20, by_speed[0.01]
    assert by_speed[0.25]["mean_accuracy"] >= 1.0, by_speed[0.25]
    assert by_speed[0.25]["training_iteration"] == 4, by_speed[0.25]

    # Stoppers: a trial stops when its loss plateaus, or at 30 results.
    stopper = CombinedStopper(
        MaximumIterationStopper(max_iter=30),
        TrialPlateauStopper(metric="loss", std=0.001, num_results=4, grace_period=4),
    )
    tuner = tune.Tuner(
        plateau,
        param_space={"floor": tune.grid_search([0.5, -100.0])},
        run_config=train.RunConfig(stop=stopper),
    )
    results = tuner.fit()
    by_floor = {r.config["floor"]: r.metrics["training_iteration"] for r in results}
    # Floor 0.5 is reached at step 5; four flat results later it has
    # plateaued. The other never plateaus: the iteration limit stops it at
    # its 30th result.
    assert by_floor[0.5] == 9, by_floor
    assert by_floor[-100.0] == 30, by_floor
    print("stopped at:", by_speed, by_floor)
