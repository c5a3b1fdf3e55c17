# Covers Ray's custom search algorithm API (python/ray/tune/search/searcher.py:
# the Searcher docstring's ExampleSearch) with python/ray/tune/search/
# concurrency_limiter.py: a Searcher subclass suggests each config, learns from
# on_trial_complete, and returns Searcher.FINISHED when done; ConcurrencyLimiter
# holds it to two trials at a time. It runs in the driver, as in Ray, and the
# param_space's constants join each config it suggests.
#
# Ray's API; for tunejet only the imports changed:
#   from ray import train, tune  ->  from tunejet import train, tune
#   from ray.tune.search import ConcurrencyLimiter, Searcher
#       ->  from tunejet.tune.search import ConcurrencyLimiter, Searcher
from tunejet import train, tune
from tunejet.tune.search import ConcurrencyLimiter, Searcher


def objective(config):
    # Best at x = 7.
    for _ in range(3):
        train.report({"loss": (config["x"] - 7) ** 2 + config["offset"]})


class Bisect(Searcher):
    """Searches integers in [low, high] for the lowest loss by halving the
    interval around the best point seen, two candidates per round."""

    def __init__(self, low, high, rounds, metric="loss", mode="min"):
        super().__init__(metric=metric, mode=mode)
        self.low, self.high = low, high
        self.rounds = rounds
        self.queue = []
        self.pending = set()
        self.scores = {}
        self.live = {}

    def _next_round(self):
        quarter = max(1, (self.high - self.low) // 4)
        self.queue = [self.low + quarter, self.high - quarter]
        self.rounds -= 1

    def suggest(self, trial_id):
        if not self.queue and not self.pending:
            if self.rounds == 0:
                return Searcher.FINISHED
            self._next_round()
        if not self.queue:
            return None  # this round's trials are still running
        x = self.queue.pop(0)
        self.pending.add(trial_id)
        self.live[trial_id] = x
        return {"x": x}

    def on_trial_complete(self, trial_id, result=None, error=False):
        self.pending.discard(trial_id)
        x = self.live.pop(trial_id)
        self.scores[x] = result[self.metric]
        if not self.pending:
            best = min(self.scores, key=self.scores.get)
            half = max(1, (self.high - self.low) // 4)
            self.low, self.high = max(0, best - half), best + half


if __name__ == "__main__":
    searcher = Bisect(low=0, high=32, rounds=4)
    results = tune.Tuner(
        objective,
        param_space={"offset": 1},
        tune_config=tune.TuneConfig(search_alg=ConcurrencyLimiter(searcher, max_concurrent=2), num_samples=20),
    ).fit()

    tried = sorted(r.config["x"] for r in results)
    assert len(tried) == 8, tried  # four rounds of two: FINISHED before num_samples
    assert all(r.config["offset"] == 1 for r in results), [r.config for r in results]
    best = results.get_best_result(metric="loss", mode="min")
    assert best.config["x"] == 7 and best.metrics["loss"] == 1, (best.config, best.metrics)
    assert sorted(searcher.scores) == tried, (searcher.scores, tried)
    print("tried", tried, "best x", best.config["x"])
