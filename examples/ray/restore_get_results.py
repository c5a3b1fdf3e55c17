# Covers Ray's python/ray/tune/tests/test_tuner_restore.py
# (test_tuner_restore_from_cloud / test_get_results): a finished
# experiment's results read back with Tuner.restore(path, trainable).get_results()
# without running anything again, the same as fit() returned.
#
# Ray's API; for tunejet only the imports changed:
#   from ray import train, tune  ->  from tunejet import train, tune
import os
import tempfile

from tunejet import train, tune


def trainable(config):
    for step in range(3):
        train.report({"score": config["x"] + step})


if __name__ == "__main__":
    storage = tempfile.mkdtemp()
    tuner = tune.Tuner(
        trainable,
        param_space={"x": tune.grid_search([1, 2, 3])},
        tune_config=tune.TuneConfig(metric="score", mode="max"),
        run_config=train.RunConfig(name="get_results", storage_path=storage),
    )
    first = tuner.fit()

    again = tune.Tuner.restore(os.path.join(storage, "get_results"), trainable=trainable).get_results()
    assert len(again) == 3 and again.num_terminated == 3
    assert sorted(r.metrics["score"] for r in again) == sorted(r.metrics["score"] for r in first)
    assert again.get_best_result().config == first.get_best_result().config == {"x": 3}
    for r in again:
        assert [h["score"] for h in r.history()] == [r.config["x"] + s for s in range(3)]
    print("restored results match what fit() returned")
