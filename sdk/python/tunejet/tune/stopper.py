"""Ray's stoppers (``ray.tune.stopper``), for RunConfig.stop.

The built-in ones (MaximumIterationStopper, ...) go to the experiment file
by name and settings: tunejet's controller runs them. A Stopper subclass
of your own, FunctionStopper and a stop function run in the driver, as in
Ray: the controller asks the driver for each result's decision
(docs/driver.md).
"""

import datetime


class Stopper:
    """Ray's base class: a subclass of your own implements
    ``__call__(self, trial_id, result)`` (True stops that trial) and
    ``stop_all(self)`` (True stops the experiment), and need not call
    ``super().__init__()``. fit() runs it in the driver."""

    _type = ""  # a built-in's type in the experiment file
    settings = {}  # a built-in's settings; read only

    def __init__(self, **settings):
        self.settings = {k: v for k, v in settings.items() if v is not None}

    def __call__(self, trial_id, result):
        raise NotImplementedError

    def stop_all(self):
        raise NotImplementedError

    def to_spec(self):
        """Return the stopper in the experiment file's syntax."""
        spec = {"type": self._type}
        spec.update(self.settings)
        return spec


def is_builtin(stopper):
    """Whether stopper is one the experiment file names (the controller
    runs it), rather than one the driver runs."""
    return isinstance(stopper, CombinedStopper) or bool(getattr(stopper, "_type", ""))


class FunctionStopper(Stopper):
    """Ray's FunctionStopper: function(trial_id, result) decides each
    trial's stop; it never stops the experiment. Runs in the driver."""

    def __init__(self, function):
        if not callable(function) or isinstance(function, Stopper):
            raise ValueError("FunctionStopper takes a function of (trial_id, result), got %r" % (function,))
        self._fn = function

    def __call__(self, trial_id, result):
        return self._fn(trial_id, result)

    def stop_all(self):
        return False

    @property
    def _driver_name(self):
        return getattr(self._fn, "__name__", None) or type(self._fn).__name__


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
    "FunctionStopper",
    "MaximumIterationStopper",
    "TrialPlateauStopper",
    "ExperimentPlateauStopper",
    "TimeoutStopper",
    "CombinedStopper",
]
