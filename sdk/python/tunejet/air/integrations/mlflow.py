"""Ray's ``ray.air.integrations.mlflow.MLflowLoggerCallback``.

One MLflow run per trial, as Ray's: its config as params when the trial
starts, each result's numeric metrics (step: training_iteration), the run
ended FINISHED or FAILED when the trial ends. Needs mlflow importable in
the driver; the callback raises ImportError at construction otherwise.
"""

import numbers

from tunejet._callbacks import _flatten
from tunejet.tune.logger import LoggerCallback


def _import_mlflow():
    try:
        import mlflow  # noqa: F401
        from mlflow.tracking import MlflowClient
    except ImportError as e:
        raise ImportError(
            "MLflowLoggerCallback needs mlflow: `pip install mlflow` where the driver runs (%s)" % e
        ) from e
    return MlflowClient


class MLflowLoggerCallback(LoggerCallback):
    """Log each trial to an MLflow run (Ray's arguments)."""

    def __init__(
        self,
        tracking_uri=None,
        *,
        registry_uri=None,
        experiment_name=None,
        tags=None,
        tracking_token=None,
        save_artifact=False,
    ):
        _import_mlflow()
        self.tracking_uri = tracking_uri
        self.registry_uri = registry_uri
        self.experiment_name = experiment_name
        self.tags = dict(tags or {})
        self.tracking_token = tracking_token
        self.should_save_artifact = save_artifact
        self._client = None
        self._experiment_id = None
        self._trial_runs = {}

    def __getstate__(self):
        state = dict(self.__dict__)
        state.update(_client=None, _experiment_id=None, _trial_runs={})
        return state

    def setup(self, *args, **kwargs):
        import os

        if self.tracking_token:
            os.environ["MLFLOW_TRACKING_TOKEN"] = self.tracking_token
        client_class = _import_mlflow()
        self._client = client_class(tracking_uri=self.tracking_uri, registry_uri=self.registry_uri)
        name = self.experiment_name or os.environ.get("MLFLOW_EXPERIMENT_NAME") or "Default"
        experiment = self._client.get_experiment_by_name(name)
        if experiment is not None:
            self._experiment_id = experiment.experiment_id
        else:
            self._experiment_id = self._client.create_experiment(name)

    def log_trial_start(self, trial):
        if trial in self._trial_runs:
            return
        tags = dict(self.tags, trial_name=str(trial))
        run = self._client.create_run(experiment_id=self._experiment_id, run_name=str(trial), tags=tags)
        self._trial_runs[trial] = run.info.run_id
        for key, value in _flatten(trial.config).items():
            self._client.log_param(run.info.run_id, key, value)

    def log_trial_result(self, iteration, trial, result):
        if trial not in self._trial_runs:
            self.log_trial_start(trial)
        run_id = self._trial_runs[trial]
        step = result.get("training_iteration") or iteration
        for key, value in _flatten(result).items():
            if isinstance(value, numbers.Number) and not isinstance(value, bool):
                self._client.log_metric(run_id, key, value, step=step)

    def log_trial_end(self, trial, failed=False):
        run_id = self._trial_runs.pop(trial, None)
        if run_id is None:
            return
        if self.should_save_artifact and "://" not in trial.local_path:
            self._client.log_artifacts(run_id, local_dir=trial.local_path)
        self._client.set_terminated(run_id, status="FAILED" if failed else "FINISHED")


__all__ = ["MLflowLoggerCallback"]
