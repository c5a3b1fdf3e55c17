"""Ray's stoppers (``ray.tune.stopper``), by name, for RunConfig.stop."""

import datetime


class Stopper:
    """A stopper of the experiment file: its type and settings."""

    _type = ""

    def __init__(self, **settings):
        self.settings = {k: v for k, v in settings.items() if v is not None}

    def to_spec(self):
        """Return the stopper in the experiment file's syntax."""
        spec = {"type": self._type}
        spec.update(self.settings)
        return spec


class MaximumIterationStopper(Stopper):
    """Stops each trial after max_iter results."""

    _type = "maximum_iteration"

    def __init__(self, max_iter):
        super().__init__(max_iter=max_iter)


class TrialPlateauStopper(Stopper):
    """Stops a trial whose metric has plateaued."""

    _type = "trial_plateau"

    def __init__(self, metric, std=None, num_results=None, grace_period=None, metric_threshold=None,
                 mode=None):
        super().__init__(metric=metric, std=std, num_results=num_results, grace_period=grace_period,
                         metric_threshold=metric_threshold, mode=mode)


class ExperimentPlateauStopper(Stopper):
    """Stops the experiment when the top trials' metric has plateaued."""

    _type = "experiment_plateau"

    def __init__(self, metric, std=None, top=None, mode=None, patience=None):
        super().__init__(metric=metric, std=std, top=top, mode=mode, patience=patience)


class TimeoutStopper(Stopper):
    """Stops the experiment after timeout seconds (or a timedelta)."""

    _type = "timeout"

    def __init__(self, timeout):
        if isinstance(timeout, datetime.timedelta):
            timeout = timeout.total_seconds()
        super().__init__(timeout=timeout)


class CombinedStopper(Stopper):
    """Stops when any of its stoppers does."""

    def __init__(self, *stoppers):
        super().__init__()
        self.stoppers = stoppers

    def to_spec(self):
        return [s.to_spec() for s in self.stoppers]


__all__ = [
    "Stopper",
    "MaximumIterationStopper",
    "TrialPlateauStopper",
    "ExperimentPlateauStopper",
    "TimeoutStopper",
    "CombinedStopper",
]
