"""Ray <= 2.6's ``ray.air`` names, for scripts written against them:
``from tunejet import air`` (``air.RunConfig``, ``air.CheckpointConfig``,
``air.FailureConfig``, ``air.ScalingConfig``, ``air.Checkpoint``,
``air.Result``), ``from tunejet.air import session`` (``session.report``,
``session.get_checkpoint``, ...), ``tunejet.air.checkpoint``,
``tunejet.air.config`` and ``tunejet.air.result``. Each is the object of
tunejet.train by the same name. Ray AIR's integrations module paths too:
``from tunejet.air.integrations.mlflow import MLflowLoggerCallback``.
"""

from tunejet._config import CheckpointConfig, FailureConfig, RunConfig, ScalingConfig, SyncConfig
from tunejet._result import Result
from tunejet._session import Checkpoint
from tunejet.air import session  # noqa: E402

__all__ = [
    "Checkpoint",
    "CheckpointConfig",
    "FailureConfig",
    "Result",
    "RunConfig",
    "ScalingConfig",
    "SyncConfig",
    "session",
]
