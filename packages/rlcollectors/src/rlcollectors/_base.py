"""What every collector shares: frame counting, iteration and the shut-down guard."""

from __future__ import annotations

from collections.abc import Iterator

from tensordict import TensorDictBase

SHUT_DOWN = "{cls} was shut down; create a new collector to collect more data."


class CollectorBase:
    """Base of the collectors: yields batches from ``_iterate`` until ``total_frames``.

    A subclass sets ``total_frames`` (``-1``: endless), ``_frames = 0`` and ``_closed = False``
    in its constructor, implements ``_iterate`` (adding each batch's frames to ``_frames``)
    and ``shutdown`` (setting ``_closed``).
    """

    total_frames: int
    _frames: int
    _closed: bool

    @property
    def frames(self) -> int:
        """Frames yielded so far."""
        return self._frames

    def __iter__(self) -> Iterator[TensorDictBase]:
        """Yields batches until ``total_frames`` frames were collected."""
        self._check_open()
        return self._iterate()

    def _iterate(self) -> Iterator[TensorDictBase]:
        raise NotImplementedError

    def shutdown(self) -> None:
        """Stops collecting; iterating afterwards raises a RuntimeError."""
        raise NotImplementedError

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(SHUT_DOWN.format(cls=type(self).__name__))
