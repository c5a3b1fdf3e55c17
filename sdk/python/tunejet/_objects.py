"""Object references: ``tunejet.put`` and ``tunejet.get``, as Ray's
``ray.put`` and ``ray.get``.

``put(value)`` in the driver pickles value and keeps it; the next fit()
(or restore) stores every object put so far in the experiment's Object
Store, so a trial reads it with ``get(ref)`` whether the reference came in
its config (``param_space={"data": ref}``) or the trainable holds it
itself (a closure over ``ref``). A trial fetches an object once per runner
and keeps the file, so trials on one runner share one copy.

References are named by the order of the script's put() calls. A
reference the trainable holds goes pickled with it; under the replay
fallback (tunejet._tuner), a trial's worker runs the script up to its
fit() call, and there put() only returns the same reference and stores
nothing.

The objects are pickled, so they must be picklable; only the driver that
submits the experiment can store them, and a trial unpickles what its own
driver put (as Ray's workers do).
"""

import os
import pickle

from tunejet import _protocol

# The key of a reference in a config: {"object_ref": name}.
REF_KEY = "object_ref"

_stored = {}  # name -> pickled bytes, in the driver
_count = 0  # put() calls so far
_cache = {}  # name -> value already read in this trial process


class ObjectRef:
    """A reference to a value given to put(); pass it to get(), or put it
    in a param_space."""

    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return "ObjectRef(%r)" % self.name

    def __eq__(self, other):
        return isinstance(other, ObjectRef) and other.name == self.name

    def __hash__(self):
        return hash(self.name)

    def to_spec(self):
        return {REF_KEY: self.name}


def put(value):
    """Store value for the trials of the next fit() and return its
    reference (Ray's ``ray.put``)."""
    global _count
    name = "py_put_%d" % _count
    _count += 1
    from tunejet import _tuner  # a cycle at import time otherwise

    if _tuner._worker is None:
        try:
            _stored[name] = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        except (pickle.PicklingError, TypeError, AttributeError) as e:
            raise TypeError("tunejet.put: the value cannot be pickled: %s" % e) from e
    return ObjectRef(name)


def get(ref):
    """Return the value a reference stands for (Ray's ``ray.get``): ref is
    what put() returned, or the ``{"object_ref": name}`` a trial's config
    holds in its place. A list of references gives a list of values."""
    if isinstance(ref, list):
        return [get(r) for r in ref]
    name = _name(ref)
    if name in _cache:
        return _cache[name]
    if _protocol.in_session():
        path = _protocol.get_object(name)
        with open(path, "rb") as f:
            value = pickle.load(f)
    elif name in _stored:
        value = pickle.loads(_stored[name])
    else:
        raise KeyError("tunejet.get: no object %r was put in this process" % name)
    _cache[name] = value
    return value


def _name(ref):
    if isinstance(ref, ObjectRef):
        return ref.name
    if isinstance(ref, dict) and set(ref) == {REF_KEY} and isinstance(ref[REF_KEY], str):
        return ref[REF_KEY]
    raise TypeError("tunejet.get: %r is not an object reference (use what tunejet.put returned)" % (ref,))


def write_all(folder):
    """Write every object put so far into folder, one file each, and
    return the ``name=path`` arguments of tunejet's --object flag."""
    if not _stored:
        return []
    os.makedirs(folder, exist_ok=True)
    args = []
    for name, data in _stored.items():
        path = os.path.join(folder, name)
        with open(path, "wb") as f:
            f.write(data)
        args.append("%s=%s" % (name, path))
    return args
