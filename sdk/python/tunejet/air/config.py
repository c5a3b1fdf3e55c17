"""Ray <= 2.6's ``ray.air.config``: the configs are tunejet.train's."""

from tunejet._config import CheckpointConfig, FailureConfig, RunConfig, ScalingConfig, SyncConfig

__all__ = ["CheckpointConfig", "FailureConfig", "RunConfig", "ScalingConfig", "SyncConfig"]
