"""``ray.tune.search.concurrency_limiter``: ConcurrencyLimiter."""

from tunejet.tune.search import ConcurrencyLimiter

__all__ = ["ConcurrencyLimiter"]
