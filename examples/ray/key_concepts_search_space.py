# Covers Ray's "Key Concepts of Ray Tune" page (doc/source/tune/key-concepts.rst):
# a function trainable reporting each step, a search space mixing
# grid_search with sampled domains, num_samples repeating the grid, and
# the ResultGrid's best result.
#
# Ray's API; for tunejet only the imports changed:
#   from ray import train, tune  ->  from tunejet import train, tune
from tunejet import train, tune


def objective(x, a, b):
    return a * (x**0.5) + b


def trainable(config):
    score = 0.0
    for x in range(1, 6):
        score = objective(x, config["a"], config["b"])
        train.report({"score": score})


if __name__ == "__main__":
    space = {"a": tune.grid_search([0.001, 0.01, 0.1, 1.0]), "b": tune.uniform(0, 1)}
    tuner = tune.Tuner(
        trainable,
        param_space=space,
        tune_config=tune.TuneConfig(num_samples=2, metric="score", mode="max"),
    )
    results = tuner.fit()

    # Four grid points, each sampled twice.
    assert len(results) == 8, len(results)
    assert results.num_errors == 0
    assert sorted({r.config["a"] for r in results}) == [0.001, 0.01, 0.1, 1.0]
    for r in results:
        assert 0 <= r.config["b"] <= 1, r.config
        assert r.metrics["training_iteration"] == 5, r.metrics
        assert abs(r.metrics["score"] - objective(5, r.config["a"], r.config["b"])) < 1e-9
    best = results.get_best_result()
    assert best.config["a"] == 1.0, best.config
    assert best.metrics["score"] == max(r.metrics["score"] for r in results)
    print("best config:", best.config)
