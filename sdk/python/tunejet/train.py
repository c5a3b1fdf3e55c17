"""Ray Train's API as Ray Tune uses it (``ray.train``): ``from tunejet
import train`` and ``from tunejet.train import RunConfig, Checkpoint``.

Inside a trial: report, get_checkpoint, get_context and Checkpoint. For
the driver: RunConfig, FailureConfig, CheckpointConfig, SyncConfig,
ScalingConfig (for tune.with_resources) and Result.
"""

from tunejet._config import CheckpointConfig, FailureConfig, RunConfig, ScalingConfig, SyncConfig
from tunejet._result import Result
from tunejet._session import Checkpoint, TrainContext, get_checkpoint, get_context, report

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
