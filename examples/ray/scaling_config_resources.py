# Covers Ray's Tune FAQ, "How do I set resources?" (doc/source/tune/faq.rst):
# tune.with_resources with a ScalingConfig; the trial holds the trainer's
# resources plus num_workers times the per-worker ones, and reads them back.
#
# Ray's API; for tunejet only the imports changed:
#   from ray import train, tune          ->  from tunejet import train, tune
#   from ray.train import ScalingConfig  ->  from tunejet.train import ScalingConfig
from tunejet import train, tune
from tunejet.train import ScalingConfig


def trainable(config):
    train.report({"resources": train.get_context().get_trial_resources()})


if __name__ == "__main__":
    scaling = ScalingConfig(trainer_resources={"CPU": 0.5}, num_workers=2, resources_per_worker={"CPU": 0.25})
    tuner = tune.Tuner(tune.with_resources(trainable, scaling), param_space={"x": 1})
    results = tuner.fit()

    (r,) = list(results)
    assert r.error is None
    # 0.5 for the trainer and 2 x 0.25 for the workers: one CPU.
    assert r.metrics["resources"].get("cpu") == 1, r.metrics["resources"]
    print("the trial holds", r.metrics["resources"])
