"""Ray's ``ray.air.integrations.wandb.WandbLoggerCallback``.

One Weights & Biases run per trial, as Ray's (id: the trial id, so that a
restored trial resumes its run): the trial's config, each result (step:
training_iteration, without excludes), and the run finished with exit code
1 when the trial errored. Needs wandb importable in the driver; the
callback raises ImportError at construction otherwise.
"""

import os

from tunejet.tune.logger import LoggerCallback


def _import_wandb():
    try:
        import wandb
    except ImportError as e:
        raise ImportError(
            "WandbLoggerCallback needs wandb: `pip install wandb` where the driver runs (%s)" % e
        ) from e
    return wandb


class WandbLoggerCallback(LoggerCallback):
    """Log each trial to a wandb run (Ray's arguments; the rest go to
    wandb.init)."""

    def __init__(
        self,
        project=None,
        group=None,
        api_key_file=None,
        api_key=None,
        excludes=None,
        log_config=False,
        upload_checkpoints=False,
        save_checkpoints=False,
        upload_timeout=1800,
        **kwargs,
    ):
        _import_wandb()
        self.project = project
        self.group = group
        self.api_key_file = api_key_file
        self.api_key = api_key
        self.excludes = list(excludes or [])
        self.log_config = log_config
        self.upload_checkpoints = upload_checkpoints or save_checkpoints
        self.kwargs = kwargs
        self._runs = {}

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_runs"] = {}
        return state

    def setup(self, *args, **kwargs):
        if self.api_key_file:
            with open(os.path.expanduser(self.api_key_file)) as f:
                os.environ["WANDB_API_KEY"] = f.read().strip()
        elif self.api_key:
            os.environ["WANDB_API_KEY"] = self.api_key

    def log_trial_start(self, trial):
        if trial in self._runs:
            return
        wandb = _import_wandb()
        init = dict(
            id=trial.trial_id,
            name=str(trial),
            project=self.project or os.environ.get("WANDB_PROJECT"),
            group=self.group or os.environ.get("WANDB_GROUP") or trial.experiment_tag.split("_")[0] or None,
            config=trial.config,
            resume="allow",
            reinit=True,
            dir=trial.local_path if "://" not in trial.local_path else None,
        )
        init.update(self.kwargs)
        self._runs[trial] = wandb.init(**init)

    def log_trial_result(self, iteration, trial, result):
        if trial not in self._runs:
            self.log_trial_start(trial)
        metrics = {k: v for k, v in result.items() if k not in self.excludes and k != "config"}
        if self.log_config:
            metrics["config"] = trial.config
        self._runs[trial].log(metrics, step=result.get("training_iteration") or iteration)

    def on_checkpoint(self, iteration, trials, trial, checkpoint, **info):
        if self.upload_checkpoints and trial in self._runs:
            self._runs[trial].save(os.path.join(checkpoint.path, "*"), base_path=os.path.dirname(checkpoint.path))

    def log_trial_end(self, trial, failed=False):
        run = self._runs.pop(trial, None)
        if run is not None:
            run.finish(exit_code=1 if failed else 0)


__all__ = ["WandbLoggerCallback"]
