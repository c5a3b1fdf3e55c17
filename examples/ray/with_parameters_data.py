# Covers Ray's "How to use Tune with large datasets" (tune.with_parameters,
# doc/source/tune/faq.rst, "How can I pass further parameter values to my
# trainable"): a large object given once by the driver and read by every
# trial, next to the trial's config.
#
# Ray's API; for tunejet only the imports changed:
#   from ray import train, tune  ->  from tunejet import train, tune
from tunejet import train, tune


def train_model(config, data=None, offset=0):
    # The data set is the same object contents in every trial.
    total = sum(x * config["weight"] for x in data) + offset
    train.report({"total": total, "n": len(data)})


if __name__ == "__main__":
    data = list(range(10000))
    tuner = tune.Tuner(
        tune.with_parameters(train_model, data=data, offset=5),
        param_space={"weight": tune.grid_search([1, 2, 3])},
        tune_config=tune.TuneConfig(metric="total", mode="max"),
    )
    results = tuner.fit()

    assert results.num_errors == 0
    for r in results:
        assert r.metrics["n"] == 10000, r.metrics
        assert r.metrics["total"] == sum(range(10000)) * r.config["weight"] + 5, r.metrics
    assert results.get_best_result().config["weight"] == 3
    print("totals:", sorted(r.metrics["total"] for r in results))
