"""Resurgo: asynchronous multi-level checkpoint/restart.

    import numpy as np
    import resurgo

    u = np.zeros(1 << 20)
    with resurgo.Store("heat", local_path="/dev/shm/ckpt") as store:
        store.protect("u", u)
        if store.latest() is not None:
            step = store.restart()          # newest intact version
        ...
        store.checkpoint(step)              # returns after the capture
        store.wait()                        # durable on node-local storage

See README.md and docs/config.md for the configuration keys.
"""

from __future__ import annotations

from resurgo import _core, errors
from resurgo.errors import (
    ConfigError,
    CorruptionError,
    Error,
    FormatError,
    InvalidArgumentError,
    MismatchError,
    NotFoundError,
    StateError,
    StorageError,
    _exception_table,
)

_core._register_exceptions(_exception_table())

from resurgo import store  # noqa: E402  (needs the translator above)
from resurgo.store import *  # noqa: E402,F401,F403  (store.__all__: the Store and its records)

__version__ = "0.1.0"

__all__ = [*store.__all__, *errors.__all__, "__version__"]
