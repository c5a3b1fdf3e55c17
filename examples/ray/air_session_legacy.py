# Covers Ray <= 2.6's AIR names, which older scripts use
# (python/ray/air/session.py, python/ray/air/config.py, and the 2.6
# "Tune: key concepts" page): air.RunConfig, air.CheckpointConfig,
# session.report with air.Checkpoint.from_dict, session.get_checkpoint.
#
# Ray's API; for tunejet only the imports changed:
#   from ray import air, tune     ->  from tunejet import air, tune
#   from ray.air import session   ->  from tunejet.air import session
from tunejet import air, tune
from tunejet.air import session


def trainable(config):
    start = 0
    checkpoint = session.get_checkpoint()
    if checkpoint:
        start = checkpoint.to_dict()["step"] + 1
    for step in range(start, 4):
        session.report(
            {"score": config["a"] * step, "trial": session.get_trial_name()},
            checkpoint=air.Checkpoint.from_dict({"step": step}),
        )


if __name__ == "__main__":
    tuner = tune.Tuner(
        trainable,
        param_space={"a": tune.grid_search([1, 2])},
        tune_config=tune.TuneConfig(metric="score", mode="max"),
        run_config=air.RunConfig(name="air_names", checkpoint_config=air.CheckpointConfig(num_to_keep=1)),
    )
    results = tuner.fit()

    assert results.num_errors == 0
    for r in results:
        assert r.metrics["score"] == r.config["a"] * 3, r.metrics
        assert r.checkpoint.to_dict() == {"step": 3}
        assert len(r.best_checkpoints) == 1
    assert results.get_best_result().config["a"] == 2
    print("Ray 2.6's AIR names run")
