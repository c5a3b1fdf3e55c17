"""Ray Tune's API (``ray.tune``): ``from tunejet import tune``.

Tuner, TuneConfig, Callback, the search space functions, with_parameters, and
Ray 2.x's re-exports of the trial side and the run configuration. The
submodules schedulers, search and stopper hold Ray's classes of the same
names. See sdk/python/README.md for what differs from Ray.
"""

from tunejet._callbacks import Callback
from tunejet._config import CheckpointConfig, FailureConfig, RunConfig, SyncConfig, TuneConfig
from tunejet._reporter import CLIReporter
from tunejet._result import Result, ResultGrid, TrialError, TuneError
from tunejet._session import Checkpoint, get_checkpoint, get_context, report
from tunejet._space import (
    choice,
    grid_search,
    lograndint,
    loguniform,
    qlograndint,
    qloguniform,
    qrandint,
    qrandn,
    quniform,
    randint,
    randn,
    sample_from,
    uniform,
)
from tunejet._tuner import Trainable, Tuner, with_parameters, with_resources
from tunejet.tune import callback, logger, schedulers, search, stopper, syncer  # noqa: E402
from tunejet.tune.stopper import Stopper  # noqa: E402

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
