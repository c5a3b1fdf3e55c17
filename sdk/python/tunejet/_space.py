"""Search spaces in Ray's names, written in the experiment file's syntax
(README "Run an experiment file")."""

import math
import numbers

from tunejet._objects import ObjectRef

_DISTRIBUTIONS = frozenset(
    [
        "grid_search",
        "choice",
        "uniform",
        "quniform",
        "loguniform",
        "qloguniform",
        "randint",
        "qrandint",
        "lograndint",
        "qlograndint",
        "randn",
        "qrandn",
        "literal",
    ]
)


class Domain:
    """A distribution of the param space: ``{name: args}`` in the file."""

    def __init__(self, name, args):
        self.name = name
        self.args = list(args)

    def to_spec(self):
        """Return the domain in the experiment file's syntax."""
        return {self.name: _plain(self.args, self.name)}

    def __repr__(self):
        return "%s(%s)" % (self.name, ", ".join(repr(a) for a in self.args))


def _log_args(lower, upper, q=None, base=10):
    args = [lower, upper] if q is None else [lower, upper, q]
    if base != 10:
        args.append(base)
    return args


def uniform(lower, upper):
    """A float in [lower, upper)."""
    return Domain("uniform", [lower, upper])


def quniform(lower, upper, q):
    """A float in [lower, upper], rounded to a multiple of q."""
    return Domain("quniform", [lower, upper, q])


def loguniform(lower, upper, base=10):
    """A float in [lower, upper), uniform in log space."""
    return Domain("loguniform", _log_args(lower, upper, base=base))


def qloguniform(lower, upper, q, base=10):
    """loguniform rounded to a multiple of q."""
    return Domain("qloguniform", _log_args(lower, upper, q, base))


def randint(lower, upper):
    """An int in [lower, upper)."""
    return Domain("randint", [lower, upper])


def qrandint(lower, upper, q=1):
    """An int in [lower, upper], a multiple of q."""
    return Domain("qrandint", [lower, upper, q])


def lograndint(lower, upper, base=10):
    """An int in [lower, upper), uniform in log space."""
    return Domain("lograndint", _log_args(lower, upper, base=base))


def qlograndint(lower, upper, q, base=10):
    """lograndint rounded to a multiple of q."""
    return Domain("qlograndint", _log_args(lower, upper, q, base))


def randn(mean=0.0, sd=1.0):
    """A normal float."""
    return Domain("randn", [mean, sd])


def qrandn(mean, sd, q):
    """randn rounded to a multiple of q."""
    return Domain("qrandn", [mean, sd, q])


def choice(categories):
    """One of categories."""
    return Domain("choice", list(categories))


def grid_search(values):
    """Every one of values, once per sample (Ray returns a dict; so does this)."""
    return {"grid_search": list(values)}


class SampleFrom(Domain):
    """Ray's tune.sample_from: a function the driver calls for each new
    trial with Ray's ``spec`` (``spec.config``: the config drawn so far);
    ``{"sample_from": "<name>"}`` in the file (docs/driver.md)."""

    def __init__(self, func):
        if not callable(func):
            raise TypeError("tune.sample_from takes a function, got %r" % (func,))
        super().__init__("sample_from", [])
        self.func = func

    def to_spec(self):
        return {"sample_from": getattr(self.func, "__name__", None) or type(self.func).__name__}

    def __repr__(self):
        return "sample_from(%s)" % self.to_spec()["sample_from"]


def sample_from(func):
    """A value the driver's function gives each trial, as Ray's: func(spec)
    with spec.config the trial's config resolved so far."""
    return SampleFrom(func)


def to_spec(space, key="param_space"):
    """Return space (a dict of values and Domains) as plain JSON values in
    the file's syntax. A one-key mapping of constants is wrapped in
    ``literal`` so that it is never read as a distribution."""
    if not isinstance(space, dict):
        raise TypeError("%s must be a dict, got %s" % (key, type(space).__name__))
    out = {}
    for k, v in space.items():
        if not isinstance(k, str):
            raise TypeError("%s keys must be strings, got %r" % (key, k))
        out[k] = _value(v, "%s.%s" % (key, k))
    return out


def _value(v, key):
    if isinstance(v, (Domain, ObjectRef)):
        return v.to_spec()
    if isinstance(v, dict):
        if len(v) == 1:
            name, arg = next(iter(v.items()))
            if name == "grid_search":
                return {"grid_search": _plain(list(arg), key)}
            if name in _DISTRIBUTIONS or not _has_domain(v):
                return {"literal": _plain(v, key)}
        return to_spec(v, key)
    return _plain(v, key)


def _has_domain(v):
    if isinstance(v, Domain):
        return True
    if isinstance(v, dict):
        if len(v) == 1 and "grid_search" in v:
            return True
        return any(_has_domain(x) for x in v.values())
    return False


def _plain(v, key):
    """Return v as JSON values, refusing what the file cannot hold."""
    if isinstance(v, (Domain, ObjectRef)):
        return v.to_spec()
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, numbers.Integral):
        return int(v)
    if isinstance(v, numbers.Real):
        f = float(v)
        if not math.isfinite(f):
            raise ValueError("%s: %r cannot be written to the experiment file (JSON)" % (key, v))
        return f
    if isinstance(v, (list, tuple)):
        return [_plain(x, key) for x in v]
    if isinstance(v, dict):
        return {str(k): _plain(x, key) for k, x in v.items()}
    item = getattr(v, "item", None)
    if callable(item):
        try:
            return _plain(item(), key)
        except (TypeError, ValueError):
            pass
    raise TypeError(
        "%s: %r (%s) is not a JSON value and cannot go into the param space; "
        "pass it as tunejet.put(obj), whose reference tunejet.get(config[...]) reads in the trial, "
        "or with tune.with_parameters(trainable, name=obj)"
        % (key, v, type(v).__name__)
    )
