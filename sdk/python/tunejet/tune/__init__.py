"""Ray Tune's API (``ray.tune``): ``from tunejet import tune``.

Tuner, TuneConfig, Callback, the search space functions, with_parameters, and
Ray 2.x's re-exports of the trial side and the run configuration. The
submodules schedulers, search and stopper hold Ray's classes of the same
names. See sdk/python/README.md for what differs from Ray.
"""

from tunejet import _lazy
from tunejet._session import Checkpoint, get_checkpoint, get_context, report

# The driver's names are imported when first used: a trial's process,
# whose trainable calls tune.report, does not load Tuner and its kin.
__getattr__, __dir__ = _lazy.attributes(__name__, {
    "Callback": "tunejet._callbacks:Callback",
    **{n: "tunejet._config:" + n for n in ("CheckpointConfig", "FailureConfig", "RunConfig", "SyncConfig", "TuneConfig")},
    "CLIReporter": "tunejet._reporter:CLIReporter",
    **{n: "tunejet._result:" + n for n in ("Result", "ResultGrid", "TrialError", "TuneError")},
    **{n: "tunejet._space:" + n for n in (
        "choice", "grid_search", "lograndint", "loguniform", "qlograndint", "qloguniform", "qrandint",
        "qrandn", "quniform", "randint", "randn", "sample_from", "uniform")},
    **{n: "tunejet._tuner:" + n for n in ("Trainable", "Tuner", "with_parameters", "with_resources")},
    **{n: "tunejet.tune." + n for n in ("callback", "logger", "schedulers", "search", "stopper", "syncer")},
    "Stopper": "tunejet.tune.stopper:Stopper",
})

__all__ = [
    "Callback",
    "CLIReporter",
    "Stopper",
    "Tuner",
    "TuneConfig",
    "ResultGrid",
    "Result",
    "TuneError",
    "TrialError",
    "Trainable",
    "with_parameters",
    "with_resources",
    "RunConfig",
    "CheckpointConfig",
    "FailureConfig",
    "SyncConfig",
    "Checkpoint",
    "report",
    "get_checkpoint",
    "get_context",
    "choice",
    "grid_search",
    "lograndint",
    "loguniform",
    "qlograndint",
    "qloguniform",
    "qrandint",
    "qrandn",
    "quniform",
    "randint",
    "randn",
    "sample_from",
    "uniform",
    "logger",
    "schedulers",
    "search",
    "stopper",
]
