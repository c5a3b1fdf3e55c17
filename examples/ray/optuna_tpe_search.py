# Covers Ray's python/ray/tune/examples/optuna_example.py and the
# "Running Tune experiments with Optuna" page: OptunaSearch (TPE) with
# points_to_evaluate tried first, under a ConcurrencyLimiter; the best
# config found is close to the optimum.
#
# Ray's API; for tunejet only the imports changed:
#   from ray import train, tune                    ->  from tunejet import train, tune
#   from ray.tune.search import ConcurrencyLimiter ->  from tunejet.tune.search import ConcurrencyLimiter
#   from ray.tune.search.optuna import OptunaSearch
#       ->  from tunejet.tune.search.optuna import OptunaSearch
# (Optuna itself is not needed: tunejet's TPE follows Optuna's.)
from tunejet import train, tune
from tunejet.tune.search import ConcurrencyLimiter
from tunejet.tune.search.optuna import OptunaSearch


def evaluate(step, width, height):
    return (0.1 + width * step / 100) ** (-1) + height * 0.1


def objective(config):
    for step in range(5):
        train.report({"iterations": step, "mean_loss": evaluate(step, config["width"], config["height"])})


if __name__ == "__main__":
    start = [{"width": 10, "height": 0}, {"width": 15, "height": -20}]
    searcher = ConcurrencyLimiter(OptunaSearch(points_to_evaluate=start, seed=7), max_concurrent=2)
    tuner = tune.Tuner(
        objective,
        tune_config=tune.TuneConfig(metric="mean_loss", mode="min", search_alg=searcher, num_samples=30),
        param_space={"width": tune.uniform(0, 20), "height": tune.uniform(-100, 100)},
    )
    results = tuner.fit()

    assert len(results) == 30 and results.num_errors == 0
    configs = [r.config for r in sorted(results, key=lambda r: r.trial_id)]
    # The points to evaluate come first, as given.
    assert configs[0] == start[0] and configs[1] == start[1], configs[:2]
    best = results.get_best_result()
    # The optimum is at width 20, height -100; TPE gets near it.
    assert best.config["height"] < -50, best.config
    assert best.metrics["mean_loss"] < evaluate(4, 10, 0), best.metrics
    print("best:", best.config, best.metrics["mean_loss"])
