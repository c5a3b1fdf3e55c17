# Covers Ray's python/ray/tune/tests/test_tuner_restore.py
# (test_tuner_restore_restart_errored, test_tuner_resume_errored_only): a run
# whose trials error, Tuner.can_restore on its path, then
# Tuner.restore(path, trainable, restart_errored=True) runs the errored
# trials again from the start and leaves the finished ones alone.
#
# Ray's API; for tunejet only the imports changed:
#   from ray import train, tune  ->  from tunejet import train, tune
import os
import tempfile

from tunejet import train, tune

MARKER = os.path.join(tempfile.mkdtemp(), "fixed")


def trainable(config):
    for step in range(3):
        if config["id"] % 2 and not os.path.exists(MARKER):
            raise RuntimeError("odd trials fail until fixed")
        train.report({"step": step, "id": config["id"]})


if __name__ == "__main__":
    storage = tempfile.mkdtemp()
    tuner = tune.Tuner(
        trainable,
        param_space={"id": tune.grid_search([0, 1, 2, 3])},
        run_config=train.RunConfig(name="restart_errored", storage_path=storage),
    )
    first = tuner.fit()
    assert first.num_errors == 2 and first.num_terminated == 2, (first.num_errors, first.num_terminated)

    path = os.path.join(storage, "restart_errored")
    assert tune.Tuner.can_restore(path)
    assert not tune.Tuner.can_restore(tempfile.mkdtemp())

    open(MARKER, "w").close()
    restored = tune.Tuner.restore(path, trainable=trainable, restart_errored=True)
    second = restored.fit()

    assert second.num_errors == 0 and second.num_terminated == 4
    for r in second:
        assert [h["step"] for h in r.history()] == [0, 1, 2], (r.config, r.history())
    print("errored trials restarted and finished")
