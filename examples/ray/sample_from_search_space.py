# Covers Ray's search space page (doc/source/tune/api/search_space.rst) and
# the key-concepts page's use of tune.sample_from: a value computed from the
# other values of the config (spec.config), a value drawn by a function of
# its own (numpy's generator), and a sample_from that reads another
# sample_from's value. Ray calls these functions in the driver; so does
# tunejet.
#
# Ray's API; for tunejet only the imports changed:
#   from ray import train, tune  ->  from tunejet import train, tune
import random

from tunejet import train, tune


def objective(config):
    train.report({"score": config["width"] * config["height"], "height": config["height"]})


if __name__ == "__main__":
    tuner = tune.Tuner(
        objective,
        tune_config=tune.TuneConfig(metric="score", mode="max", num_samples=2),
        param_space={
            "width": tune.grid_search([1, 2, 3]),
            # Computed from another value of the config.
            "height": tune.sample_from(lambda spec: spec.config.width * 10),
            # A draw of the function's own.
            "noise": tune.sample_from(lambda _: random.uniform(0, 1)),
            # Reads another sample_from's value, resolved first.
            "area": tune.sample_from(lambda spec: spec.config["height"] * spec.config.width),
        },
    )
    results = tuner.fit()

    assert results.num_errors == 0
    assert len(results) == 6, len(results)
    for r in results:
        c = r.config
        assert c["height"] == c["width"] * 10, c
        assert c["area"] == c["height"] * c["width"], c
        assert 0 <= c["noise"] <= 1, c
    assert len({r.config["noise"] for r in results}) == 6  # drawn for each trial
    best = results.get_best_result()
    assert best.config["width"] == 3 and best.metrics["score"] == 90, best.config
    print("best config:", best.config)
