# Covers Ray's TuneConfig(max_concurrent_trials=...) (doc/source/tune/tutorials/tune-resources.rst,
# "How to limit concurrency"): no more than that many trials run at once.
#
# Ray's API; for tunejet only the imports changed:
#   from ray import train, tune  ->  from tunejet import train, tune
import time

from tunejet import train, tune


def trainable(config):
    start = time.time()
    time.sleep(0.2)
    train.report({"start": start, "end": time.time()})


if __name__ == "__main__":
    tuner = tune.Tuner(
        trainable,
        param_space={"i": tune.grid_search(list(range(4)))},
        tune_config=tune.TuneConfig(max_concurrent_trials=1),
    )
    results = tuner.fit()

    spans = sorted((r.metrics["start"], r.metrics["end"]) for r in results)
    assert len(spans) == 4
    for (_, end), (start, _) in zip(spans, spans[1:]):
        assert start >= end, "two trials ran at once: %r" % spans
    print("one trial at a time")
