# Covers Ray's function trainable API (python/ray/tune/trainable/function_trainable.py,
# wrap_function, and the stopping page doc/source/tune/tutorials/tune-stopping.rst):
# a result with done=True ends its trial, stop={"done": True} is Ray's way
# of saying so, a returned number becomes the final result's _metric, and
# a generator trainable reports each value it yields.
#
# Ray's API; for tunejet only the imports changed:
#   from ray import train, tune  ->  from tunejet import train, tune
from tunejet import train, tune


def until_done(config):
    for step in range(100):
        train.report({"step": step, "done": step == config["last"]})


def returns_a_number(config):
    return config["x"] * 10


def yields_results(config):
    for step in range(3):
        yield {"loss": config["x"] / (step + 1)}


if __name__ == "__main__":
    grid = tune.Tuner(
        until_done,
        param_space={"last": tune.grid_search([2, 5])},
        run_config=train.RunConfig(stop={"done": True}),
    ).fit()
    steps = sorted(r.metrics["step"] for r in grid)
    assert steps == [2, 5], steps

    grid = tune.Tuner(returns_a_number, param_space={"x": tune.grid_search([1, 2])}).fit()
    assert sorted(r.metrics["_metric"] for r in grid) == [10, 20], [r.metrics for r in grid]

    grid = tune.Tuner(yields_results, param_space={"x": 6.0}).fit()
    assert [h["loss"] for h in grid[0].history()] == [6.0, 3.0, 2.0], grid[0].history()
    print("done, returned numbers and yielded results as Ray's")
