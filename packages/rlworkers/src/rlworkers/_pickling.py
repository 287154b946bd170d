"""Crossing into worker processes: ``CloudpickleBox``, ``dumps`` and ``clean_worker_environ``."""

from __future__ import annotations

import io
import os
import types
from collections import ChainMap
from typing import Any

import cloudpickle

__all__ = ["CloudpickleBox", "clean_worker_environ", "dumps"]

# cloudpickle's own reduction of a code object (the dispatch table is pickle's public hook)
_CODE_REDUCE = cloudpickle.Pickler.dispatch_table[types.CodeType]


def _reduce_code(code: types.CodeType) -> tuple:
    rebuild, args = _CODE_REDUCE(code)
    return _named_code, (rebuild, args, code.co_filename)


def _named_code(rebuild: Any, args: tuple, filename: str) -> types.CodeType:
    return rebuild(*args).replace(co_filename=filename)


class _Pickler(cloudpickle.Pickler):
    """cloudpickle, keeping the file name of each code object it sends by value.

    cloudpickle replaces it with ``"<dynamic-code>"`` (to make its output independent of where
    a function was defined); a worker's traceback through a user's function sent by value (a
    lambda, a closure, a function of the main script under ``spawn``) then names no file.
    Keeping the name makes those frames show the user's file, line and source text.
    """

    dispatch_table = ChainMap({types.CodeType: _reduce_code}, cloudpickle.Pickler.dispatch_table)


def dumps(obj: Any) -> bytes:
    """``cloudpickle.dumps(obj)``, except that functions sent by value keep their file name.

    Examples:
        >>> import pickle
        >>> double = lambda x: 2 * x
        >>> copy = pickle.loads(dumps(double))
        >>> copy(21), copy.__code__.co_filename == double.__code__.co_filename
        (42, True)
    """
    buffer = io.BytesIO()
    _Pickler(buffer).dump(obj)
    return buffer.getvalue()


def clean_worker_environ() -> None:
    """Remove inherited environment values that break a worker process; call before starting one.

    tensordict 0.14's ``set_lazy_legacy`` (used by ``TensorDict.from_modules`` and
    ``torch.stack``) writes ``LAZY_LEGACY_OP=None`` into ``os.environ`` on exit when no mode was
    set before. A spawned worker inherits it, and its first lazy-legacy query raises
    ``ValueError: invalid truth value 'none'``. Unset means what ``None`` meant: the default.

    Examples:
        >>> import os
        >>> os.environ["LAZY_LEGACY_OP"] = "None"
        >>> clean_worker_environ()
        >>> "LAZY_LEGACY_OP" in os.environ
        False
    """
    if os.environ.get("LAZY_LEGACY_OP") == "None":
        del os.environ["LAZY_LEGACY_OP"]


class CloudpickleBox:
    """Carries any object through a pickling start method (spawn, forkserver) with cloudpickle.

    Plain pickle refuses lambdas, closures and classes defined in a function or a script;
    boxing them makes them travel by value (``dumps``: their frames in a worker's traceback
    keep their file and line). The receiving side reads ``box.obj``.

    Examples:
        >>> import pickle
        >>> box = pickle.loads(pickle.dumps(CloudpickleBox(lambda x: x + 1)))
        >>> box.obj(1)
        2
    """

    __slots__ = ("obj",)

    def __init__(self, obj: Any) -> None:
        self.obj = obj

    def __reduce__(self):
        return _unbox, (dumps(self.obj),)

    def __repr__(self) -> str:
        return f"CloudpickleBox({self.obj!r})"


def _unbox(payload: bytes) -> CloudpickleBox:
    return CloudpickleBox(cloudpickle.loads(payload))
