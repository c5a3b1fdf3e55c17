# Covers Ray's "How to Use Tune's Callbacks" page (doc/source/tune/api/callbacks.rst,
# python/ray/tune/callback.py): a tune.Callback given to RunConfig sees each
# trial start, each result and each completion once, in the driver, and the
# experiment's end.
#
# Ray's API; for tunejet only the imports changed:
#   from ray import train, tune  ->  from tunejet import train, tune
import collections

from tunejet import train, tune


class Recorder(tune.Callback):
    def __init__(self):
        self.started, self.completed, self.ended = [], [], 0
        self.results = collections.defaultdict(list)

    def on_trial_start(self, iteration, trials, trial, **info):
        self.started.append(trial.trial_id)

    def on_trial_result(self, iteration, trials, trial, result, **info):
        self.results[trial.trial_id].append(result["step"])

    def on_trial_complete(self, iteration, trials, trial, **info):
        self.completed.append(trial.trial_id)

    def on_experiment_end(self, trials, **info):
        self.ended += 1


def trainable(config):
    for step in range(4):
        train.report({"step": step, "score": config["x"] * step})


if __name__ == "__main__":
    recorder = Recorder()
    results = tune.Tuner(
        trainable,
        param_space={"x": tune.grid_search([1, 2, 3])},
        run_config=train.RunConfig(callbacks=[recorder]),
    ).fit()

    ids = sorted(r.trial_id for r in results)
    assert sorted(recorder.started) == ids, recorder.started
    assert sorted(recorder.completed) == ids, recorder.completed
    for trial_id in ids:
        assert recorder.results[trial_id] == [0, 1, 2, 3], recorder.results[trial_id]
    assert recorder.ended == 1
    print("each hook saw each event once")
