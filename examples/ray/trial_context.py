# Covers Ray's train.get_context() in a Tune trial (python/ray/train/context.py,
# TrainContext: get_trial_name, get_trial_id, get_trial_dir,
# get_experiment_name): each trial knows its name, id and folder, and the
# results carry the same trial id.
#
# Ray's API; for tunejet only the imports changed:
#   from ray import train, tune  ->  from tunejet import train, tune
import os

from tunejet import train, tune


def trainable(config):
    ctx = train.get_context()
    with open(os.path.join(ctx.get_trial_dir(), "mine.txt"), "w") as f:
        f.write(ctx.get_trial_name())
    train.report({"name": ctx.get_trial_name(), "id": ctx.get_trial_id(), "exp": ctx.get_experiment_name()})


if __name__ == "__main__":
    tuner = tune.Tuner(
        trainable,
        param_space={"x": tune.grid_search([1, 2])},
        # The trial's own files are copied to storage with its results.
        run_config=train.RunConfig(name="context_example", sync_config=train.SyncConfig(sync_artifacts=True)),
    )
    results = tuner.fit()

    names = set()
    for r in results:
        assert r.metrics["id"] == r.metrics["trial_id"], r.metrics
        assert r.metrics["exp"] == "context_example", r.metrics
        with open(os.path.join(r.path, "mine.txt")) as f:
            assert f.read() == r.metrics["name"]
        names.add(r.metrics["name"])
    assert len(names) == 2, names
    print("trial names:", sorted(names))
