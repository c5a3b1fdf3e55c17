# Covers Ray's object store in Tune (doc/source/tune/faq.rst, "How can I
# use large datasets in Tune?"): ray.put once in the driver, the reference
# in the param space, ray.get in each trial.
#
# Ray's API; for tunejet only the imports changed:
#   import ray                   ->  import tunejet as ray
#   from ray import train, tune  ->  from tunejet import train, tune
import tunejet as ray
from tunejet import train, tune


def trainable(config):
    table = ray.get(config["table"])
    train.report({"value": table[config["key"]]})


if __name__ == "__main__":
    ref = ray.put({"a": 1, "b": 20, "c": 300})
    tuner = tune.Tuner(
        trainable,
        param_space={"table": ref, "key": tune.grid_search(["a", "b", "c"])},
        tune_config=tune.TuneConfig(metric="value", mode="max"),
    )
    results = tuner.fit()

    assert results.num_errors == 0
    values = sorted(r.metrics["value"] for r in results)
    assert values == [1, 20, 300], values
    print("values:", values)
