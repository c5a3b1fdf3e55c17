# Ray Tune example: doc/source/tune/examples/optuna_example.ipynb, its
# multi-objective part (OptunaSearch with metric=["loss", "gain"] and
# mode=["min", "max"], limited to 4 concurrent trials, over width, height
# and activation; then the best trial by each metric).
# The sleep of each step is left out, num_samples is 16 and the trials
# take 10 steps, not 100; seed (Optuna's) is given so that the run is
# repeatable.
#
# Written against Ray's API; for tunejet only the imports changed:
#   from ray import train, tune                   ->  from tunejet import train, tune
#   from ray.tune.search import ConcurrencyLimiter
#       ->  from tunejet.tune.search import ConcurrencyLimiter
#   from ray.tune.search.optuna import OptunaSearch
#       ->  from tunejet.tune.search.optuna import OptunaSearch
# and `import ray` with `ray.init(...)` are gone: there is no cluster to join.
from tunejet import train, tune
from tunejet.tune.search import ConcurrencyLimiter
from tunejet.tune.search.optuna import OptunaSearch


def evaluate(step, width, height, activation):
    activation_boost = 10 if activation == "relu" else 0
    return (0.1 + width * step / 100) ** (-1) + height * 0.1 + activation_boost


def multi_objective(config):
    width, height = config["width"], config["height"]
    for step in range(config["steps"]):
        intermediate_score = evaluate(step, width, height, config["activation"])
        train.report({"iterations": step, "loss": intermediate_score, "gain": intermediate_score * width})


search_space = {
    "steps": 10,
    "width": tune.uniform(0, 20),
    "height": tune.uniform(-100, 100),
    "activation": tune.choice(["relu", "tanh"]),
}

searcher = OptunaSearch(metric=["loss", "gain"], mode=["min", "max"], seed=7)
algo = ConcurrencyLimiter(searcher, max_concurrent=4)

tuner = tune.Tuner(
    multi_objective,
    tune_config=tune.TuneConfig(
        search_alg=algo,
        num_samples=16,
    ),
    param_space=search_space,
)
results = tuner.fit()

print("Best hyperparameters for loss found were: ", results.get_best_result("loss", "min").config)
print("Best hyperparameters for gain found were: ", results.get_best_result("gain", "max").config)
