"""Ray <= 2.6's ``ray.air`` names, for scripts written against them:
``from tunejet import air`` (``air.RunConfig``, ``air.CheckpointConfig``,
``air.FailureConfig``, ``air.ScalingConfig``, ``air.Checkpoint``,
``air.Result``), ``from tunejet.air import session`` (``session.report``,
``session.get_checkpoint``, ...), ``tunejet.air.checkpoint``,
``tunejet.air.config`` and ``tunejet.air.result``. Each is the object of
tunejet.train by the same name. Ray AIR's integrations module paths too:
``from tunejet.air.integrations.mlflow import MLflowLoggerCallback``.
"""

from tunejet import _lazy
from tunejet._session import Checkpoint

# The driver's names are imported when first used (tunejet._lazy).
__getattr__, __dir__ = _lazy.attributes(__name__, {
    **{n: "tunejet._config:" + n for n in ("CheckpointConfig", "FailureConfig", "RunConfig", "ScalingConfig", "SyncConfig")},
    "Result": "tunejet._result:Result",
    "session": "tunejet.air.session",
})

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
