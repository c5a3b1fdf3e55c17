"""How the trainable goes to its trials: by value, as Ray ships it.

fit() pickles the trainable with cloudpickle: a function or class defined
in the script, in a notebook or by exec() goes by value, with its closure
and the globals it uses; one an installed or importable module defines
goes by reference (its module and name), as cloudpickle decides. The bytes
travel as the experiment's object TRAINABLE_OBJECT, beside the driver's
description (DRIVER_OBJECT), and each trial's worker loads
them: the driver's script does not run again in the trials.

When cloudpickle is not installed, or the trainable cannot be pickled,
pack() says why and fit() falls back to the replay of the script
(tunejet._worker.find_trainable), with a warning.
"""

import pickle
import re

# The object that carries the pickled trainable to the workers.
TRAINABLE_OBJECT = "py_trainable"
# The object that carries the driver's description of its fit() to them.
DRIVER_OBJECT = "py_driver"


def trainable_name(trainable):
    """The name trials of trainable run under: its __name__, made safe."""
    name = getattr(trainable, "__name__", None) or type(trainable).__name__
    name = re.sub(r"[^A-Za-z0-9_-]", "_", name).lstrip("_-")
    return name or "trainable"


def pack(trainable):
    """Return (bytes, None), the trainable pickled by cloudpickle, or
    (None, why) when it cannot go by value."""
    try:
        import cloudpickle
    except ImportError as e:
        return None, "cloudpickle is not installed (%s)" % e
    try:
        return cloudpickle.dumps(trainable, protocol=pickle.DEFAULT_PROTOCOL), None
    except Exception as e:  # cloudpickle raises what the object's reducers raise
        return None, "it cannot be pickled: %s: %s" % (type(e).__name__, e)


def unpack(path):
    """Return the trainable pickled in the file at path (what pack gave)."""
    with open(path, "rb") as f:
        return pickle.load(f)
