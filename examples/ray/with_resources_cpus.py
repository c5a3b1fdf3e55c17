# Covers Ray's "A Guide To Parallelism and Resources for Ray Tune"
# (doc/source/tune/tutorials/tune-resources.rst): tune.with_resources sets
# what each trial holds, so at most as many trials run at once as the
# machine's CPUs hold, and a trial can read what it holds.
#
# Ray's API; for tunejet only the imports changed:
#   from ray import train, tune  ->  from tunejet import train, tune
import os
import time

from tunejet import train, tune


def trainable(config):
    # Record when this trial ran, to count how many ran at once.
    start = time.time()
    time.sleep(0.3)
    train.report({"start": start, "end": time.time(), "cpus": train.get_context().get_trial_resources().get("cpu")})


if __name__ == "__main__":
    cpus = os.cpu_count() or 1
    # Each trial holds every CPU: trials run one after another.
    tuner = tune.Tuner(
        tune.with_resources(trainable, {"cpu": cpus}),
        param_space={"i": tune.grid_search(list(range(3)))},
    )
    results = tuner.fit()

    assert results.num_errors == 0
    spans = sorted((r.metrics["start"], r.metrics["end"]) for r in results)
    for (s1, e1), (s2, e2) in zip(spans, spans[1:]):
        assert s2 >= e1, "two trials holding every CPU ran at once: %r" % spans
    assert all(r.metrics["cpus"] == cpus for r in results), [r.metrics["cpus"] for r in results]
    print("trials ran one at a time on", cpus, "CPUs")
