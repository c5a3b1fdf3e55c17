# Covers Ray's ResultGrid error handling (doc/source/tune/examples/tune_analyze_results.ipynb,
# "Inspecting errors"): a trial that raises with max_failures=0 ends in
# ERROR, its traceback is in Result.error and ResultGrid.errors, and the
# other trials finish.
#
# Ray's API; for tunejet only the imports changed:
#   from ray import train, tune  ->  from tunejet import train, tune
from tunejet import train, tune


def trainable(config):
    for step in range(3):
        if config["x"] == 2 and step == 1:
            raise ValueError("x=2 is out of cheese")
        train.report({"score": config["x"] * step})


if __name__ == "__main__":
    tuner = tune.Tuner(trainable, param_space={"x": tune.grid_search([1, 2, 3])})
    results = tuner.fit()

    assert results.num_errors == 1, results.num_errors
    assert results.num_terminated == 2, results.num_terminated
    errored = [r for r in results if r.error]
    assert len(errored) == 1 and errored[0].config["x"] == 2
    assert "out of cheese" in str(errored[0].error), errored[0].error
    assert "out of cheese" in str(results.errors[0])
    # The failed trial's result up to its error is kept.
    assert errored[0].metrics["score"] == 0, errored[0].metrics
    print("errored trial:", errored[0].config)
