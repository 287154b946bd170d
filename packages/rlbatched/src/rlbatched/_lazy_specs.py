"""Specs read on demand: a batched env whose metadata come from its workers (``ParallelEnv``).

Such an env knows its batch size, device and specs only once its workers have started and
reported them. ``LazySpecsMixin`` puts a check in front of ``EnvBase``'s accessors of those
(``batch_size``, ``device``, ``output_spec``, ``input_spec`` and, through them, every
``full_*_spec``, ``*_spec`` and key list, and ``_batch_locked``), and in front of the two
``EnvBase`` methods that read the batch size or device straight from ``__dict__``: the first
one read starts the workers (``_ensure_metadata``). Until then nothing is started: construction stays cheap, and
``reset``/``step`` start the workers as before.
"""

from __future__ import annotations

from typing import Any

from rlcore import EnvBase

__all__ = ["LazySpecsMixin"]

START_FAILED = (
    "{cls} could not start its workers to read its specs (they come from the workers): "
    "{type}: {message}"
)


def _on_demand(prop: property) -> property:
    """``prop``, reading (or writing) only once the env's metadata are known."""
    read, write = prop.fget, prop.fset

    def fget(self: Any) -> Any:
        if self.__dict__.get("_metas") is None:
            self._ensure_metadata()
        return read(self)

    def fset(self: Any, value: Any) -> None:
        if self.__dict__.get("_metas") is None:
            self._ensure_metadata()
        write(self, value)

    return property(fget, fset if write is not None else None, doc=prop.__doc__)


def _get_batch_locked(self: Any) -> bool:
    if self.__dict__.get("_metas") is None:
        self._ensure_metadata()
    return self.__dict__["_batch_locked"]


def _set_batch_locked(self: Any, value: bool) -> None:
    self.__dict__["_batch_locked"] = value


class LazySpecsMixin:
    """Metadata-dependent accessors of ``EnvBase`` that start the workers when first read.

    The class using it defines ``_start_metadata()`` (start whatever reports the metadata, and
    record them with ``_set_metadata``); ``_metas`` (in ``__dict__``) is None until then.
    """

    batch_size = _on_demand(EnvBase.batch_size)
    device = _on_demand(EnvBase.device)
    output_spec = _on_demand(EnvBase.output_spec)
    input_spec = _on_demand(EnvBase.input_spec)
    _batch_locked = property(_get_batch_locked, _set_batch_locked)

    def _start_metadata(self) -> None:
        raise NotImplementedError

    # EnvBase's methods that read the batch size or device from ``__dict__`` directly
    def _assert_tensordict_shape(self, tensordict: Any) -> None:
        if self.__dict__.get("_metas") is None:
            self._ensure_metadata()
        super()._assert_tensordict_shape(tensordict)

    def step_and_maybe_reset(self, tensordict: Any) -> tuple:
        if self.__dict__.get("_metas") is None:
            self._ensure_metadata()
        return super().step_and_maybe_reset(tensordict)

    def _ensure_metadata(self) -> None:
        """Start the workers if the metadata are not known yet (they report them)."""
        if self.__dict__.get("_metas") is not None:
            return
        try:
            self._start_metadata()
        except AttributeError as err:
            # raised from a property, it would make Python look the attribute up again
            # (``__getattr__``) and report it missing instead
            raise RuntimeError(
                START_FAILED.format(cls=type(self).__name__, type="AttributeError", message=err)
            ) from err
