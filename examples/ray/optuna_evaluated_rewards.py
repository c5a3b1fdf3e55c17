# Covers Ray's OptunaSearch docstring and test_searchers.py's
# points_to_evaluate with evaluated_rewards (python/ray/tune/search/optuna/
# optuna_search.py): configs already evaluated elsewhere, with their
# results, are given to the searcher, which learns from them without
# running them again.
#
# Ray's API; for tunejet only the imports changed:
#   from ray import train, tune                      ->  from tunejet import train, tune
#   from ray.tune.search.optuna import OptunaSearch  ->  from tunejet.tune.search.optuna import OptunaSearch
from tunejet import train, tune
from tunejet.tune.search.optuna import OptunaSearch


def objective(config):
    # Best at x = 0.8.
    train.report({"score": 1 - (config["x"] - 0.8) ** 2})


if __name__ == "__main__":
    known = [{"x": 0.1}, {"x": 0.2}, {"x": 0.75}, {"x": 0.85}]
    rewards = [1 - (p["x"] - 0.8) ** 2 for p in known]
    searcher = OptunaSearch(points_to_evaluate=known, evaluated_rewards=rewards, n_startup_trials=4, seed=7)
    tuner = tune.Tuner(
        objective,
        tune_config=tune.TuneConfig(metric="score", mode="max", search_alg=searcher, num_samples=6),
        param_space={"x": tune.uniform(0, 1)},
    )
    results = tuner.fit()

    assert results.num_errors == 0
    assert len(results) == 6, len(results)  # the known points are not run again
    xs = [r.config["x"] for r in results]
    assert not set(xs) & {p["x"] for p in known}, xs
    # Past its startup trials with the known ones, TPE suggests near the
    # best of them from the first trial on.
    assert abs(xs[0] - 0.8) < 0.3, xs
    print("configs:", ["%.3f" % x for x in xs])
