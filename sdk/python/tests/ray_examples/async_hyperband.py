# Ray Tune example: python/ray/tune/examples/async_hyperband_example.py
# (ASHA stops the trials that fall behind: AsyncHyperBandScheduler over a
# function trainable reporting an intermediate score each step).
# The sleep of each step is left out, the smoke test runs 8 trials to the
# scheduler's max_t, and the random search is seeded
# (BasicVariantGenerator(random_state=...), Ray's API) so that the run is
# repeatable.
#
# Written against Ray's API; for tunejet only the imports changed:
#   from ray import train, tune                          ->  from tunejet import train, tune
#   from ray.tune.schedulers import AsyncHyperBandScheduler
#       ->  from tunejet.tune.schedulers import AsyncHyperBandScheduler
from tunejet.tune.search import BasicVariantGenerator
#   from ray.tune.search import BasicVariantGenerator
#       ->  from tunejet.tune.search import BasicVariantGenerator
# and `import ray` with `ray.init(...)` are gone: there is no cluster to join.
import argparse

from tunejet import train, tune
from tunejet.tune.schedulers import AsyncHyperBandScheduler
from tunejet.tune.search import BasicVariantGenerator


def evaluation_fn(step, width, height):
    return (0.1 + width * step / 100) ** (-1) + height * 0.1


def easy_objective(config):
    # Hyperparameters
    width, height = config["width"], config["height"]

    for step in range(config["steps"]):
        # Iterative training function - can be any arbitrary training procedure
        intermediate_score = evaluation_fn(step, width, height)
        # Feed the score back to Tune.
        train.report({"iterations": step, "mean_loss": intermediate_score})


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--smoke-test", action="store_true", help="Finish quickly for testing")
    args, _ = parser.parse_known_args()

    # AsyncHyperBand enables aggressive early stopping of bad trials.
    scheduler = AsyncHyperBandScheduler(grace_period=1, max_t=9, reduction_factor=3)

    tuner = tune.Tuner(
        easy_objective,
        run_config=train.RunConfig(
            name="asha_test",
            stop={"training_iteration": 9999},
        ),
        tune_config=tune.TuneConfig(
            metric="mean_loss",
            mode="min",
            scheduler=scheduler,
            search_alg=BasicVariantGenerator(random_state=3),
            num_samples=8 if args.smoke_test else 100,
        ),
        param_space={  # Hyperparameter space
            "steps": 9,
            "width": tune.uniform(10, 100),
            "height": tune.uniform(0, 100),
        },
    )
    results = tuner.fit()
    print("Best hyperparameters found were: ", results.get_best_result().config)
