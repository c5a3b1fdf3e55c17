# Covers Ray's Repeater (python/ray/tune/search/repeater.py): each suggestion of
# the wrapped searcher runs in `repeat` trials, told apart by
# config["__trial_index__"] (handy as a seed), and the searcher completes with
# the mean of the group's metric. num_samples counts every trial, repeats
# included. Runs in the driver, as in Ray.
#
# Ray's API; for tunejet only the imports changed:
#   from ray import train, tune  ->  from tunejet import train, tune
#   from ray.tune.search import Repeater, Searcher
#       ->  from tunejet.tune.search import Repeater, Searcher
#   from ray.tune.search.repeater import TRIAL_INDEX
#       ->  from tunejet.tune.search.repeater import TRIAL_INDEX
import random

from tunejet import train, tune
from tunejet.tune.search import Repeater, Searcher
from tunejet.tune.search.repeater import TRIAL_INDEX


def noisy(config):
    rng = random.Random(config[TRIAL_INDEX])  # each repeat its own seed
    train.report({"score": config["width"] + rng.choice([-1.0, 1.0])})


class Widths(Searcher):
    def __init__(self, widths):
        super().__init__(metric="score", mode="max")
        self.widths = list(widths)
        self.means = {}
        self.given = {}

    def suggest(self, trial_id):
        if not self.widths:
            return Searcher.FINISHED
        width = self.widths.pop(0)
        self.given[trial_id] = width
        return {"width": width}

    def on_trial_complete(self, trial_id, result=None, error=False):
        self.means[self.given[trial_id]] = result[self.metric]


if __name__ == "__main__":
    widths = Widths([4, 8])
    repeat = 4
    results = tune.Tuner(
        noisy,
        tune_config=tune.TuneConfig(search_alg=Repeater(widths, repeat=repeat), num_samples=2 * repeat),
    ).fit()

    seen = sorted((r.config["width"], r.config[TRIAL_INDEX]) for r in results)
    assert seen == [(w, i) for w in (4, 8) for i in range(repeat)], seen
    for width in (4, 8):
        scores = [r.metrics["score"] for r in results if r.config["width"] == width]
        assert widths.means[width] == sum(scores) / repeat, (width, widths.means, scores)
    print("means of each group:", widths.means)
