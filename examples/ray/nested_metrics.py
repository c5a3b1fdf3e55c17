# Covers Ray's nested results (doc/source/tune/tutorials/tune-metrics.rst):
# a metric inside a nested dict is named with slashes, "val/loss", for the
# TuneConfig's metric, the stop dict and get_best_result. A stop dict
# criterion is met when the value reaches or passes its threshold.
#
# Ray's API; for tunejet only the imports changed:
#   from ray import train, tune  ->  from tunejet import train, tune
from tunejet import train, tune


def trainable(config):
    for step in range(10):
        val = {"loss": config["scale"] / (step + 1), "acc": config["scale"] * step / 10}
        train.report({"val": val, "train": {"loss": 1.0}})


if __name__ == "__main__":
    tuner = tune.Tuner(
        trainable,
        param_space={"scale": tune.grid_search([1.0, 4.0])},
        tune_config=tune.TuneConfig(metric="val/loss", mode="min"),
        run_config=train.RunConfig(stop={"val/acc": 0.8}),
    )
    results = tuner.fit()

    by_scale = {r.config["scale"]: r.metrics for r in results}
    # scale 1 reaches acc 0.8 at its ninth result; scale 4 at its third.
    assert by_scale[1.0]["training_iteration"] == 9, by_scale[1.0]
    assert by_scale[4.0]["training_iteration"] == 3, by_scale[4.0]
    # Best by val/loss, the last result of each: 1/9 against 4/3.
    assert results.get_best_result().config["scale"] == 1.0
    print({k: v["training_iteration"] for k, v in by_scale.items()})
