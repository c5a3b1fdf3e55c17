"""Ray's ``ray.tune.callback``: the Callback base class (also
``tunejet.tune.Callback``)."""

from tunejet._callbacks import Callback

__all__ = ["Callback"]
