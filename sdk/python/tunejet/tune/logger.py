"""Ray's ``ray.tune.logger`` names.

LoggerCallback is Ray's base for callbacks that log per trial: override
log_trial_start, log_trial_result and log_trial_end. Ray's default loggers
(JsonLoggerCallback, CSVLoggerCallback, TBXLoggerCallback) are always on
in tunejet — its syncer writes result.json, progress.csv and the
TensorBoard event file of each trial — so those names are callbacks that
do nothing more, there for scripts that list them.
"""

from tunejet._callbacks import Callback


class LoggerCallback(Callback):
    """Ray's LoggerCallback: per-trial logging hooks."""

    def log_trial_start(self, trial):
        pass

    def log_trial_restore(self, trial):
        pass

    def log_trial_save(self, trial):
        pass

    def log_trial_result(self, iteration, trial, result):
        pass

    def log_trial_end(self, trial, failed=False):
        pass

    def on_trial_start(self, iteration, trials, trial, **info):
        self.log_trial_start(trial)

    def on_trial_restore(self, iteration, trials, trial, **info):
        self.log_trial_restore(trial)

    def on_trial_save(self, iteration, trials, trial, **info):
        self.log_trial_save(trial)

    def on_trial_result(self, iteration, trials, trial, result, **info):
        self.log_trial_result(iteration, trial, result)

    def on_trial_complete(self, iteration, trials, trial, **info):
        self.log_trial_end(trial, failed=False)

    def on_trial_error(self, iteration, trials, trial, **info):
        self.log_trial_end(trial, failed=True)


class JsonLoggerCallback(LoggerCallback):
    """result.json: written by tunejet's syncer whether listed or not."""


class CSVLoggerCallback(LoggerCallback):
    """progress.csv: written by tunejet's syncer whether listed or not."""


class TBXLoggerCallback(LoggerCallback):
    """The TensorBoard event file: written by tunejet's syncer unless
    TUNE_DISABLE_AUTO_CALLBACK_LOGGERS=1."""


__all__ = ["LoggerCallback", "JsonLoggerCallback", "CSVLoggerCallback", "TBXLoggerCallback"]
