"""Ray Train's API as Ray Tune uses it (``ray.train``): ``from tunejet
import train`` and ``from tunejet.train import RunConfig, Checkpoint``.

Inside a trial: report, get_checkpoint, get_context and Checkpoint. For
the driver: RunConfig, FailureConfig, CheckpointConfig, SyncConfig,
ScalingConfig (for tune.with_resources) and Result.
"""

from tunejet import _lazy
from tunejet._session import Checkpoint, TrainContext, get_checkpoint, get_context, report

# The driver's names are imported when first used (tunejet._lazy).
__getattr__, __dir__ = _lazy.attributes(__name__, {
    **{n: "tunejet._config:" + n for n in ("CheckpointConfig", "FailureConfig", "RunConfig", "ScalingConfig", "SyncConfig")},
    "Result": "tunejet._result:Result",
})

__all__ = [
    "Checkpoint",
    "CheckpointConfig",
    "FailureConfig",
    "Result",
    "RunConfig",
    "ScalingConfig",
    "SyncConfig",
    "TrainContext",
    "get_checkpoint",
    "get_context",
    "report",
]
