# Covers Ray's "How to control console output" page
# (doc/source/tune/tutorials/tune-output.rst) and python/ray/tune/progress_reporter.py:
# a CLIReporter with the metric and parameter columns to show, and the
# verbosity of RunConfig. The table the run prints has those columns.
#
# Ray's API; for tunejet only the imports changed:
#   from ray import train, tune  ->  from tunejet import train, tune
import contextlib
import io
import os
import sys
import tempfile

from tunejet import train, tune


def trainable(config):
    for step in range(3):
        train.report({"acc": config["lr"] * step, "loss": 1 - config["lr"] * step, "extra": 0})


if __name__ == "__main__":
    reporter = tune.CLIReporter(metric_columns=["acc", "loss"], parameter_columns=["lr"], max_report_frequency=1)
    # The table is printed on this process's stdout by the tunejet
    # process; catch it in a file to check its header.
    caught = tempfile.TemporaryFile(mode="w+")
    sys.stdout.flush()
    saved = os.dup(sys.stdout.fileno())
    os.dup2(caught.fileno(), sys.stdout.fileno())
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            results = tune.Tuner(
                trainable,
                param_space={"lr": tune.grid_search([0.1, 0.2]), "wd": tune.uniform(0, 1)},
                run_config=train.RunConfig(progress_reporter=reporter, verbose=2),
            ).fit()
    finally:
        os.dup2(saved, sys.stdout.fileno())
    caught.seek(0)
    printed = caught.read()

    assert results.num_errors == 0
    headers = [line.split() for line in printed.splitlines() if line.startswith("Trial name")]
    assert headers, printed
    # Trial name, status, the one parameter column, iter, total time, the two metrics.
    assert headers[-1] == ["Trial", "name", "status", "lr", "iter", "total", "time", "(s)", "acc", "loss"], headers[-1]
    print("table header:", " ".join(headers[-1]))
