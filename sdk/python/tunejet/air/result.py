"""Ray <= 2.6's ``ray.air.result``: Result is tunejet.train's."""

from tunejet._result import Result

__all__ = ["Result"]
