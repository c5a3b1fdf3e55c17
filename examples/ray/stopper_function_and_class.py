# Covers Ray's "How to Define Stopping Criteria for a Ray Tune Experiment" page
# (doc/source/tune/tutorials/tune-stopping.rst), its sections on stopping with a
# function and with a class (python/ray/tune/stopper/stopper.py): a function of
# (trial_id, result) stops each trial on its own; a tune.Stopper subclass keeps
# state across trials, and its stop_all ends the whole experiment. Both run in
# the driver, as in Ray.
#
# Ray's API; for tunejet only the imports changed:
#   from ray import train, tune  ->  from tunejet import train, tune
#   from ray.tune import Stopper  ->  from tunejet.tune import Stopper
from tunejet import train, tune
from tunejet.tune import Stopper


def learner(config):
    for step in range(1, 51):
        accuracy = min(1.0, round(step * config["rate"], 6))
        train.report({"mean_accuracy": accuracy})


def good_enough(trial_id, result):
    # Stops this trial only: once it is accurate enough, or after 10 results.
    return result["mean_accuracy"] >= 0.8 or result["training_iteration"] >= 10


class FirstToTarget(Stopper):
    """Once any trial reaches the target, stop that trial and every other."""

    def __init__(self, target):
        self.target = target
        self.winner = None
        self.judged = 0

    def __call__(self, trial_id, result):
        self.judged += 1
        if self.winner is None and result["mean_accuracy"] >= self.target:
            self.winner = trial_id
        return self.winner is not None

    def stop_all(self):
        return self.winner is not None


if __name__ == "__main__":
    rates = tune.grid_search([0.05, 0.1, 0.3])

    # A stop function: each trial ends on its own terms.
    results = tune.Tuner(learner, param_space={"rate": rates},
                         run_config=train.RunConfig(stop=good_enough)).fit()
    iterations = {r.config["rate"]: r.metrics["training_iteration"] for r in results}
    # 0.05 reaches 0.5 by iteration 10; 0.1 reaches 0.8 at 8; 0.3 at 3.
    assert iterations == {0.05: 10, 0.1: 8, 0.3: 3}, iterations

    # A Stopper class with stop_all: the trials run one at a time, slowest
    # learner first; the first that reaches the target ends the experiment,
    # so no other trial runs.
    stopper = FirstToTarget(target=0.5)
    results = tune.Tuner(
        learner,
        param_space={"rate": rates},
        tune_config=tune.TuneConfig(max_concurrent_trials=1),
        run_config=train.RunConfig(stop=stopper),
    ).fit()
    reached = {r.config["rate"]: r.metrics.get("training_iteration") for r in results}
    assert reached[0.05] == 10, reached  # 10 * 0.05 = 0.5: the target
    assert reached.get(0.1) is None and reached.get(0.3) is None, reached
    assert stopper.judged == 10, stopper.judged
    print("stop function:", iterations, "stop_all:", reached)
