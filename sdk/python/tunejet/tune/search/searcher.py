"""``ray.tune.search.searcher``: the Searcher base class."""

from tunejet.tune.search import Searcher

__all__ = ["Searcher"]
