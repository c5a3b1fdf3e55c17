# Ray Tune example: doc/source/tune/examples/bayesopt_example.ipynb
# (BayesOptSearch, limited to 4 concurrent trials, minimizes the mean loss
# of a function trainable over width and height).
# The sleep of each step is left out and the smoke test's trials take 10
# steps, not 100; random_state (Ray's API) is given so that the run is
# repeatable.
#
# Written against Ray's API; for tunejet only the imports changed:
#   from ray import train, tune                   ->  from tunejet import train, tune
#   from ray.tune.search import ConcurrencyLimiter
#       ->  from tunejet.tune.search import ConcurrencyLimiter
#   from ray.tune.search.bayesopt import BayesOptSearch
#       ->  from tunejet.tune.search.bayesopt import BayesOptSearch
# and `import ray` with `ray.init(...)` are gone: there is no cluster to join.
from tunejet import train, tune
from tunejet.tune.search import ConcurrencyLimiter
from tunejet.tune.search.bayesopt import BayesOptSearch


def evaluate(step, width, height):
    return (0.1 + width * step / 100) ** (-1) + height * 0.1


def objective(config):
    for step in range(config["steps"]):
        score = evaluate(step, config["width"], config["height"])
        train.report({"iterations": step, "mean_loss": score})


algo = BayesOptSearch(utility_kwargs={"kind": "ucb", "kappa": 2.5, "xi": 0.0}, random_state=42, random_search_steps=4)
algo = ConcurrencyLimiter(algo, max_concurrent=4)

num_samples = 12

search_space = {
    "steps": 10,
    "width": tune.uniform(0, 20),
    "height": tune.uniform(-100, 100),
}

tuner = tune.Tuner(
    objective,
    tune_config=tune.TuneConfig(
        metric="mean_loss",
        mode="min",
        search_alg=algo,
        num_samples=num_samples,
    ),
    param_space=search_space,
)
results = tuner.fit()

print("Best hyperparameters found were: ", results.get_best_result().config)
