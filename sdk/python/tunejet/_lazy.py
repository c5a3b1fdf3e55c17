"""Names a module imports on first use: the driver API (Tuner, the
configs, the schedulers) stays out of a trial's process, whose trainable
needs only report and get_checkpoint of the same modules."""

import importlib
import sys


def attributes(module_name, names):
    """Return (__getattr__, __dir__) for module module_name: each of names
    maps to "module" or "module:attribute", imported when first read and
    then kept in the module."""

    def __getattr__(name):
        target = names.get(name)
        if target is None:
            raise AttributeError("module %r has no attribute %r" % (module_name, name))
        module, _, attribute = target.partition(":")
        value = importlib.import_module(module)
        if attribute:
            value = getattr(value, attribute)
        setattr(sys.modules[module_name], name, value)
        return value

    def __dir__():
        return sorted(set(vars(sys.modules[module_name])) | set(names))

    return __getattr__, __dir__
