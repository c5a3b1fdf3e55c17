# Covers Ray's MedianStoppingRule (python/ray/tune/schedulers/median_stopping_rule.py,
# and its tests in python/ray/tune/tests/test_trial_scheduler.py): a trial
# whose best result is below the median of the others' running averages at
# the same time is stopped once grace_period and min_samples_required are met.
#
# Ray's API; for tunejet only the imports changed:
#   from ray import train, tune                       ->  from tunejet import train, tune
#   from ray.tune.schedulers import MedianStoppingRule
#       ->  from tunejet.tune.schedulers import MedianStoppingRule
import time

from tunejet import train, tune
from tunejet.tune.schedulers import MedianStoppingRule

STEPS = 20


def trainable(config):
    for step in range(1, STEPS + 1):
        time.sleep(0.05)  # a step of training takes a while
        train.report({"acc": config["level"], "step": step})


if __name__ == "__main__":
    rule = MedianStoppingRule(time_attr="step", grace_period=3, min_samples_required=3)
    tuner = tune.Tuner(
        trainable,
        param_space={"level": tune.grid_search([6, 5, 4, 3, 2, 1])},
        # One trial at a time, best first: each later trial is compared with those before it.
        tune_config=tune.TuneConfig(metric="acc", mode="max", scheduler=rule, max_concurrent_trials=1),
    )
    results = tuner.fit()

    assert results.num_errors == 0
    steps = {r.config["level"]: r.metrics["step"] for r in results}
    # The best level always beats the median and runs to the end ...
    assert steps[6] == STEPS, steps
    # ... and a poor one is stopped once it can be compared.
    assert any(s < STEPS for s in steps.values()), steps
    print("steps by level:", dict(sorted(steps.items())))
