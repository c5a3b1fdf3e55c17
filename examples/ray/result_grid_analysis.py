# Covers Ray's "Analyzing Tune Experiment Results" page
# (doc/source/tune/examples/tune_analyze_results.ipynb): ResultGrid's
# get_best_result with scopes, get_dataframe with filter_metric, a Result's
# metrics_dataframe, config and path.
#
# Ray's API; for tunejet only the imports changed:
#   from ray import train, tune  ->  from tunejet import train, tune
# Needs pandas (Debian: python3-pandas), as Ray's dataframes do.
import os

from tunejet import train, tune


def trainable(config):
    # The loss dips at step 2 for peak=2 and at the last step for peak=4.
    for step in range(5):
        train.report({"loss": abs(step - config["peak"]) + config["peak"] / 10, "step": step})


if __name__ == "__main__":
    tuner = tune.Tuner(
        trainable,
        param_space={"peak": tune.grid_search([2, 4])},
        tune_config=tune.TuneConfig(metric="loss", mode="min"),
    )
    grid = tuner.fit()

    # Scope "last": the last result decides (peak 4 ends at 0.4).
    assert grid.get_best_result().config["peak"] == 4
    # Scope "all": the best result of any step decides (peak 2 reached 0.2).
    assert grid.get_best_result(scope="all").config["peak"] == 2

    df = grid.get_dataframe()
    assert len(df) == 2 and "config/peak" in df.columns, df.columns
    best_rows = grid.get_dataframe(filter_metric="loss", filter_mode="min")
    assert sorted(best_rows["loss"].round(6)) == [0.2, 0.4], best_rows["loss"]

    for result in grid:
        history = result.metrics_dataframe
        assert list(history["step"]) == [0, 1, 2, 3, 4], history
        assert os.path.isdir(result.path), result.path
    print(df[["config/peak", "loss"]])
