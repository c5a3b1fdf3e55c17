"""The functions of the param space and of PBT that run in the driver.

Ray calls ``tune.sample_from`` functions, PBT's function mutations and its
``custom_explore_fn`` in the driver; so does tunejet. The experiment file
names them (``{"sample_from": "<name>"}``, ``custom_explore_fn: "<name>"``)
and the controller asks the driver for their values (docs/driver.md):

- ``sample``: a new trial's config, drawn by random or grid search, with
  each sample_from value null; the driver calls each function with Ray's
  ``spec`` (``spec.config`` the values resolved so far), resolving in
  passes when one function reads another's value, as Ray does.
- ``explore``: a PBT exploit's config, explored, with the keys whose
  function mutation resamples null; the driver calls those functions, then
  ``custom_explore_fn``.
"""

import copy


class Unresolved(Exception):
    """A sample_from function read a value not resolved yet."""


class _View(dict):
    """Ray's spec view of a config: keys as attributes too; reading a value
    that another sample_from function has still to give raises
    Unresolved, so that the function is called again later."""

    def __init__(self, value, pending, path=()):
        super().__init__(value)
        self._pending = pending
        self._path = path

    def __getitem__(self, key):
        path = self._path + (key,)
        if path in self._pending:
            raise Unresolved(".".join(str(p) for p in path))
        value = super().__getitem__(key)
        if isinstance(value, dict):
            return _View(value, self._pending, path)
        return value

    def get(self, key, default=None):
        try:
            return self[key]
        except KeyError:
            return default

    def __getattr__(self, key):
        if key.startswith("_"):
            raise AttributeError(key)
        try:
            return self[key]
        except KeyError:
            raise AttributeError(key) from None


class Functions:
    """The driver's functions of one experiment: sample_from functions by
    config path, PBT's function mutations by dotted key, and its
    custom_explore_fn."""

    def __init__(self, sample_from=None, mutations=None, custom_explore_fn=None):
        self.sample_from = dict(sample_from or {})
        self.mutations = dict(mutations or {})
        self.custom_explore_fn = custom_explore_fn

    def __bool__(self):
        return bool(self.sample_from or self.mutations or self.custom_explore_fn)

    def explore_name(self):
        """The name of what answers an explore question, for explain."""
        if self.custom_explore_fn is not None:
            return getattr(self.custom_explore_fn, "__name__", None) or type(self.custom_explore_fn).__name__
        return "hyperparam_mutations"

    def fills(self, param_space):
        """The paths of the function mutations param_space lacks, which
        the param space gets as sample_from (collect)."""
        return [p for p, f in self.sample_from.items() if isinstance(f, _Fill) and not _has_path(param_space or {}, p)]

    def sample(self, config):
        """Return config with every sample_from value resolved."""
        from tunejet import _space

        config = copy.deepcopy(config)
        pending = set(self.sample_from)
        while pending:
            done = []
            for path in sorted(pending, key=str):
                spec = _View({"config": config}, {("config",) + p for p in pending})
                try:
                    value = self.sample_from[path](spec)
                except Unresolved:
                    continue
                set_path(config, path, _space._plain(value, "sample_from " + ".".join(map(str, path))))
                done.append(path)
            if not done:
                raise ValueError(
                    "tune.sample_from functions at %s read each other's values in a cycle"
                    % ", ".join(".".join(map(str, p)) for p in sorted(pending, key=str))
                )
            pending.difference_update(done)
        return config

    def explore(self, config, resample):
        """Return a PBT exploit's config: each key of resample (dotted) set
        to its function mutation's value, then custom_explore_fn's."""
        from tunejet import _space

        config = copy.deepcopy(config)
        for key in resample:
            fn = self.mutations.get(key)
            if fn is None:
                raise KeyError("hyperparam_mutations has no function for %r" % key)
            set_path(config, tuple(key.split(".")), _space._plain(fn(), "hyperparam_mutations." + key))
        if self.custom_explore_fn is not None:
            config = self.custom_explore_fn(config)
            if config is None:
                raise ValueError("custom_explore_fn returned None; it must return the config")
        return _space._plain(config, "custom_explore_fn's config")


def set_path(config, path, value):
    """Set the value at path in config, creating mappings on the way."""
    node = config
    for key in path[:-1]:
        if isinstance(node, list):
            node = node[int(key)]
            continue
        node = node.setdefault(key, {})
    last = path[-1]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value


def collect(param_space, scheduler):
    """Return the Functions of an experiment: the sample_from functions in
    param_space (by path), and PBT's function mutations and
    custom_explore_fn. A function mutation whose key param_space lacks
    gives the trials their first value too, as Ray's on_trial_add fills
    the config: param_space gets a sample_from calling it."""
    from tunejet import _space

    sample_from = {}

    def walk(value, path):
        if isinstance(value, _space.SampleFrom):
            sample_from[path] = value.func
        elif isinstance(value, dict):
            for k, v in value.items():
                walk(v, path + (k,))
        elif isinstance(value, (list, tuple)):
            for i, v in enumerate(value):
                walk(v, path + (str(i),))

    walk(param_space or {}, ())
    mutations, custom = {}, None
    pbt = getattr(scheduler, "_driver_functions", None)
    if callable(pbt):
        mutations, custom = pbt()
    for key, fn in mutations.items():
        path = tuple(key.split("."))
        if not _has_path(param_space or {}, path) and path not in sample_from:
            sample_from[path] = _Fill(fn)
    return Functions(sample_from, mutations, custom)


class _Fill:
    """A function mutation as a sample_from: it ignores the spec."""

    def __init__(self, fn):
        self.fn = fn
        self.name = getattr(fn, "__name__", None) or type(fn).__name__

    def __call__(self, spec):
        return self.fn()


def _has_path(space, path):
    node = space
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return False
        node = node[key]
    return True
