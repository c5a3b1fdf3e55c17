# Covers what Ray's trainables rely on (doc/source/tune/faq.rst, "How can I
# use Tune with ... state from the driver"): the trainable travels to the
# trials by value, with what its closure holds, so a folder the driver made
# with tempfile.mkdtemp() before fit() is the same folder in every trial.
#
# Ray's API; for tunejet only the imports changed:
#   from ray import train, tune  ->  from tunejet import train, tune
import os
import tempfile

from tunejet import train, tune


def make_trainable(out_dir, scale):
    def trainable(config):
        with open(os.path.join(out_dir, "trial-%d.txt" % config["i"]), "w") as f:
            f.write(str(config["i"] * scale))
        train.report({"value": config["i"] * scale})

    return trainable


if __name__ == "__main__":
    shared = tempfile.mkdtemp(prefix="driver-")
    tuner = tune.Tuner(make_trainable(shared, 7), param_space={"i": tune.grid_search([1, 2, 3])})
    results = tuner.fit()

    assert results.num_errors == 0
    assert sorted(os.listdir(shared)) == ["trial-1.txt", "trial-2.txt", "trial-3.txt"], os.listdir(shared)
    assert sorted(r.metrics["value"] for r in results) == [7, 14, 21]
    print("every trial wrote into", shared)
