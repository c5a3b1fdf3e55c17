# Covers Ray's python/ray/tune/examples/pbt_example.py: a class trainable
# (tune.Trainable with setup, step, save_checkpoint, load_checkpoint) under
# PopulationBasedTraining; a trial that exploits another continues from
# that trial's checkpoint with an explored config.
#
# Ray's API; for tunejet only the imports changed:
#   from ray import train, tune                            ->  from tunejet import train, tune
#   from ray.tune.schedulers import PopulationBasedTraining
#       ->  from tunejet.tune.schedulers import PopulationBasedTraining
import time

from tunejet import train, tune
from tunejet.tune.schedulers import PopulationBasedTraining


class Climber(tune.Trainable):
    """Climbs towards 100 at a speed set by lr; best near lr = 0.1."""

    def setup(self, config):
        self.lr = config["lr"]
        self.height = 0.0

    def step(self):
        time.sleep(0.05)  # a step of training takes a while
        self.height += max(0.0, 1.0 - abs(self.lr - 0.1) * 5)
        return {"height": self.height, "lr": self.lr}

    def save_checkpoint(self, checkpoint_dir):
        return {"height": self.height}

    def load_checkpoint(self, checkpoint):
        self.height = checkpoint["height"]

    def reset_config(self, new_config):
        self.lr = new_config["lr"]
        return True


if __name__ == "__main__":
    pbt = PopulationBasedTraining(
        time_attr="training_iteration",
        perturbation_interval=5,
        hyperparam_mutations={"lr": tune.uniform(0.001, 0.2)},
    )
    tuner = tune.Tuner(
        Climber,
        run_config=train.RunConfig(
            stop={"training_iteration": 30},
            checkpoint_config=train.CheckpointConfig(checkpoint_frequency=1),
        ),
        tune_config=tune.TuneConfig(metric="height", mode="max", scheduler=pbt, num_samples=4),
        param_space={"lr": tune.grid_search([0.001, 0.01, 0.1, 0.15])},
    )
    results = tuner.fit()

    assert results.num_errors == 0
    assert len(results) == 16, len(results)
    for r in results:
        assert r.metrics["training_iteration"] == 30, r.metrics
    # Exploitation took some trials off their starting lr.
    changed = [r for r in results if len({h["lr"] for h in r.history()}) > 1]
    assert changed, "no trial exploited another"
    best = results.get_best_result()
    print("best height %.1f with lr %.3f; %d trials exploited" % (best.metrics["height"], best.metrics["lr"], len(changed)))
