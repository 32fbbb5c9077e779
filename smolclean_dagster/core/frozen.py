"""Read-only module constants: a cleaning function cannot carry state from one batch to the next in them.

A worker cleans batch after batch with the same module loaded, so a function that appends to a module-level
list or fills a module-level dict would make a row's result depend on the batches cleaned before it, on
that worker only. Constants are therefore frozen when the code is loaded: a dict becomes a read-only
mapping (`types.MappingProxyType`: lookups, `in`, `.get`, `.items()`, `Series.map` and `replace` work as
before), a list a tuple, a set a frozenset, all the way down; a function that tries to change one fails on
its first batch with the reason (in validation, where the model sees it).

The sandbox worker loads this file by path and freezes what the code defines (`freeze_namespace`); the
export copies `read_only` into every module with constants and writes them as `NAME = read_only(...)`, so
the module on its own behaves as it did in the sandbox. Standard library only.
"""

from types import FunctionType, MappingProxyType


def read_only(value):
    """A constant as a read-only value, all the way down: a dict as a read-only mapping, a list or tuple as
    a tuple, a set as a frozenset; anything else as it is."""
    if isinstance(value, (dict, MappingProxyType)):
        return MappingProxyType({key: read_only(item) for key, item in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(read_only(item) for item in value)
    if isinstance(value, set):
        return frozenset(value)
    return value


def freeze_namespace(namespace):
    """Make the constants of executed code read-only in place (`read_only`), and the default values of its
    functions too (a mutable default is a constant as well).

    Example:
        >>> namespace = {"CODES": {"a": [1]}, "__name__": "m"}
        >>> freeze_namespace(namespace)
        >>> namespace["CODES"]["a"]
        (1,)
    """
    for name, value in list(namespace.items()):
        if name.startswith("__"):
            continue  # the interpreter's own entries (`__builtins__`)
        if isinstance(value, (dict, list, set, tuple)):
            namespace[name] = read_only(value)
        elif isinstance(value, FunctionType):
            if value.__defaults__:
                value.__defaults__ = read_only(value.__defaults__)
            if value.__kwdefaults__:
                value.__kwdefaults__ = {key: read_only(item) for key, item in value.__kwdefaults__.items()}
