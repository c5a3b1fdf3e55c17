# Covers Ray's TuneConfig(time_budget_s=...) with num_samples=-1
# (doc/source/tune/api/execution.rst, TuneConfig): trials are sampled
# without end until the experiment's time budget is spent, then the
# experiment stops and fit() returns the trials it ran.
#
# Ray's API; for tunejet only the imports changed:
#   from ray import train, tune  ->  from tunejet import train, tune
import time

from tunejet import train, tune


def trainable(config):
    for step in range(5):
        time.sleep(0.1)
        train.report({"score": config["x"] * step})


if __name__ == "__main__":
    tuner = tune.Tuner(
        trainable,
        param_space={"x": tune.uniform(0, 1)},
        tune_config=tune.TuneConfig(num_samples=-1, time_budget_s=4, metric="score", mode="max"),
    )
    results = tuner.fit()

    ran = [r for r in results if r.metrics.get("training_iteration")]
    assert ran, "no trial ran within the budget"
    # When the budget is spent the experiment ends: no trial is left running.
    assert all(r.status in ("TERMINATED", "ERROR") for r in results), [r.status for r in results]
    print("%d trials ran within the time budget" % len(ran))
