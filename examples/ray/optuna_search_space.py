# Covers Ray's "Running Tune experiments with Optuna" page
# (doc/source/tune/examples/optuna_example.ipynb, "Providing an initial set
# of hyperparameters" and "Conditional search spaces" aside): the search
# space, metric and mode given to OptunaSearch itself, not to the Tuner.
#
# Ray's API; for tunejet only the imports changed:
#   from ray import train, tune                      ->  from tunejet import train, tune
#   from ray.tune.search.optuna import OptunaSearch  ->  from tunejet.tune.search.optuna import OptunaSearch
from tunejet import train, tune
from tunejet.tune.search.optuna import OptunaSearch


def objective(config):
    loss = (config["x"] - 3) ** 2 + (0 if config["kind"] == "good" else 5)
    train.report({"loss": loss})


if __name__ == "__main__":
    space = {"x": tune.uniform(-10, 10), "kind": tune.choice(["good", "bad"])}
    searcher = OptunaSearch(space=space, metric="loss", mode="min", seed=3)
    tuner = tune.Tuner(objective, tune_config=tune.TuneConfig(search_alg=searcher, num_samples=40))
    results = tuner.fit()

    assert len(results) == 40 and results.num_errors == 0
    for r in results:
        assert -10 <= r.config["x"] <= 10 and r.config["kind"] in ("good", "bad"), r.config
    best = results.get_best_result(metric="loss", mode="min")
    assert best.config["kind"] == "good" and abs(best.config["x"] - 3) < 3, best.config
    print("best:", best.config)
