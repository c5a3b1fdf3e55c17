"""Ray's trial schedulers (``ray.tune.schedulers``), by name.

Each class takes Ray's arguments and becomes ``{"type": ..., settings}``
in the experiment file; only the arguments given are written, and tunejet
applies Ray's defaults to the others.
"""

import datetime

from tunejet import _space


class TrialScheduler:
    """A scheduler of the experiment file: its type and settings."""

    _type = ""
    _unsupported = ()

    def __init__(self, **settings):
        for key in self._unsupported:
            if settings.get(key) is not None:
                raise ValueError("%s(%s=...) is not supported" % (type(self).__name__, key))
        self.settings = {k: v for k, v in settings.items() if v is not None and k not in self._unsupported}

    def to_spec(self):
        """Return the scheduler in the experiment file's syntax."""
        spec = {"type": self._type}
        for k, v in self.settings.items():
            if isinstance(v, datetime.timedelta):
                v = v.total_seconds()
            spec[k] = _space._plain(v, "tune_config.scheduler." + k)
        return spec

    def __repr__(self):
        return "%s(%s)" % (type(self).__name__, ", ".join("%s=%r" % kv for kv in self.settings.items()))


class FIFOScheduler(TrialScheduler):
    """Runs trials in order, to their end (the default)."""

    _type = "fifo"


class AsyncHyperBandScheduler(TrialScheduler):
    """ASHA: stops trials below the top 1/reduction_factor at each rung."""

    _type = "async_hyperband"

    def __init__(self, time_attr=None, metric=None, mode=None, max_t=None, grace_period=None,
                 reduction_factor=None, brackets=None, stop_last_trials=None):
        super().__init__(time_attr=time_attr, metric=metric, mode=mode, max_t=max_t,
                         grace_period=grace_period, reduction_factor=reduction_factor,
                         brackets=brackets, stop_last_trials=stop_last_trials)


class ASHAScheduler(AsyncHyperBandScheduler):
    """Ray's alias of AsyncHyperBandScheduler."""

    _type = "asha"


class HyperBandScheduler(TrialScheduler):
    """Synchronous HyperBand: pauses trials at each rung."""

    _type = "hyperband"

    def __init__(self, time_attr=None, metric=None, mode=None, max_t=None, reduction_factor=None,
                 stop_last_trials=None):
        super().__init__(time_attr=time_attr, metric=metric, mode=mode, max_t=max_t,
                         reduction_factor=reduction_factor, stop_last_trials=stop_last_trials)


class MedianStoppingRule(TrialScheduler):
    """Stops a trial whose best result falls below the median of the others'."""

    _type = "median_stopping_rule"

    def __init__(self, time_attr=None, metric=None, mode=None, grace_period=None,
                 min_samples_required=None, min_time_slice=None, hard_stop=None):
        super().__init__(time_attr=time_attr, metric=metric, mode=mode, grace_period=grace_period,
                         min_samples_required=min_samples_required, min_time_slice=min_time_slice,
                         hard_stop=hard_stop)


class PopulationBasedTraining(TrialScheduler):
    """PBT: trials below the top quantile continue from a better trial's
    checkpoint with a perturbed config. hyperparam_mutations takes
    distributions, lists and dicts of them, as Ray's: explore moves a list's
    value to a neighbour in the list (or resamples one from it), and
    multiplies a distribution's value by a perturbation factor (or
    resamples it; tune.choice is a distribution). A function as a
    mutation, and custom_explore_fn, run in the driver as in Ray: the
    controller asks the driver to call them (docs/driver.md)."""

    _type = "pbt"

    def __init__(self, time_attr=None, metric=None, mode=None, perturbation_interval=None,
                 burn_in_period=None, hyperparam_mutations=None, quantile_fraction=None,
                 resample_probability=None, perturbation_factors=None, custom_explore_fn=None,
                 log_config=None, require_attrs=None, synch=None):
        del log_config, require_attrs  # Ray's logging and checks; nothing to do here
        if synch:
            raise ValueError("PopulationBasedTraining(synch=True) is not supported")
        if custom_explore_fn is not None and not callable(custom_explore_fn):
            raise TypeError("custom_explore_fn must be a function, got %r" % (custom_explore_fn,))
        self._functions = {}
        self._custom_explore_fn = custom_explore_fn
        super().__init__(time_attr=time_attr, metric=metric, mode=mode,
                         perturbation_interval=perturbation_interval, burn_in_period=burn_in_period,
                         hyperparam_mutations=_mutations(hyperparam_mutations, self._functions),
                         quantile_fraction=quantile_fraction, resample_probability=resample_probability,
                         perturbation_factors=perturbation_factors,
                         custom_explore_fn=_name(custom_explore_fn) if custom_explore_fn else None)

    def _driver_functions(self):
        """Return the function mutations (by dotted key) and
        custom_explore_fn, which the driver calls."""
        return dict(self._functions), self._custom_explore_fn


def _name(fn):
    return getattr(fn, "__name__", None) or type(fn).__name__


def _mutations(mutations, functions, prefix=""):
    """Return hyperparam_mutations for the file: a function becomes
    {"sample_from": name}, kept in functions by its dotted key."""
    if mutations is None:
        return None
    out = {}
    for k, v in mutations.items():
        if isinstance(v, dict):
            out[k] = _mutations(v, functions, prefix + k + ".")
        elif isinstance(v, (list, tuple)):
            # A list stays a list: explore shifts its value to a neighbour
            # in it, where a distribution (tune.choice too) is multiplied.
            out[k] = list(v)
        elif isinstance(v, _space.SampleFrom):
            functions[prefix + k] = _no_spec(v.func)
            out[k] = v
        elif callable(v) and not isinstance(v, _space.Domain):
            functions[prefix + k] = v
            out[k] = {"sample_from": _name(v)}
        else:
            out[k] = v
    return out


def _no_spec(func):
    """A sample_from function as a mutation: Ray calls it with no spec."""
    return lambda: func(None)


__all__ = [
    "TrialScheduler",
    "FIFOScheduler",
    "AsyncHyperBandScheduler",
    "ASHAScheduler",
    "HyperBandScheduler",
    "MedianStoppingRule",
    "PopulationBasedTraining",
]
