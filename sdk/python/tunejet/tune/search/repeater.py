"""``ray.tune.search.repeater``: Repeater and TRIAL_INDEX."""

from tunejet.tune.search import TRIAL_INDEX, Repeater

__all__ = ["Repeater", "TRIAL_INDEX"]
