"""Ray <= 2.6's ``ray.air.checkpoint``: Checkpoint is tunejet.train's."""

from tunejet._session import Checkpoint

__all__ = ["Checkpoint"]
