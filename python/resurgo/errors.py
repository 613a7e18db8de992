"""Exception classes of Resurgo.

Every error raised by the library derives from :class:`Error`. The native
extension maps each C++ ``resurgo::ErrorCode`` to one of these classes and
keeps the C++ message unchanged, so that a failure reads the same in C
(``rsg_last_error``), C++, Fortran (``resurgo_last_error``) and Python. A
message names the cause (region label, version, path, configuration key);
about a call on a store it reads ``<call> on store '<name>': <what failed>;
<what to do>``. Text from outside (labels, names, paths, keys, values) has
its control characters written as ``\\xNN``, so a message is one line.
"""

from __future__ import annotations

__all__ = [
    "Error",
    "ConfigError",
    "FormatError",
    "CorruptionError",
    "MismatchError",
    "StorageError",
    "StateError",
    "InvalidArgumentError",
    "NotFoundError",
]


class Error(Exception):
    """Base class of every Resurgo error (also unexpected internal failures)."""


class ConfigError(Error):
    """Unknown configuration key or bad value; the message names the key."""


class FormatError(Error):
    """Not a Resurgo container file, or an unsupported format version."""


class CorruptionError(Error):
    """Checksum mismatch or damaged file."""


class MismatchError(Error):
    """The checkpoint does not fit the protected regions (size, type, set)."""


class StorageError(Error):
    """File-system failure (ENOSPC, EIO, permissions); names the path."""


class StateError(Error):
    """The call is not valid now (for example, the store is closed)."""


class InvalidArgumentError(Error, ValueError):
    """Bad argument: zero size, duplicate label, bad version or name."""


class NotFoundError(Error, LookupError):
    """No such version, region or file."""


for _name in __all__:
    globals()[_name].__module__ = "resurgo"  # shown as resurgo.ConfigError
del _name


def _exception_table() -> dict:
    return {name: globals()[name] for name in __all__}
