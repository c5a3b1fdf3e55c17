# Covers Ray's strict metric check (python/ray/tune/execution/tune_controller.py,
# _validate_result_metrics, and test_tune_restore/test_api "metric not in
# result"): a trial whose result lacks TuneConfig's metric makes fit()
# raise, with Ray's message, unless TUNE_DISABLE_STRICT_METRIC_CHECKING=1.
#
# Ray's API; for tunejet only the imports changed:
#   from ray import train, tune  ->  from tunejet import train, tune
#   from ray.tune import TuneError  ->  from tunejet.tune import TuneError
import os

from tunejet import train, tune
from tunejet.tune import TuneError


def trainable(config):
    train.report({"acc": 1.0})  # no "loss"


if __name__ == "__main__":
    tuner = tune.Tuner(trainable, tune_config=tune.TuneConfig(metric="loss", mode="min"))
    try:
        tuner.fit()
    except TuneError as e:
        assert "did not include the specified metric(s) `loss`" in str(e), e
    else:
        raise AssertionError("fit() did not raise for a result without the metric")

    os.environ["TUNE_DISABLE_STRICT_METRIC_CHECKING"] = "1"
    results = tune.Tuner(trainable, tune_config=tune.TuneConfig(metric="loss", mode="min")).fit()
    assert results.num_errors == 0 and results[0].metrics["acc"] == 1.0
    print("strict metric check as Ray's")
