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
    _iterator: Iterator[TensorDictBase] | None = None

    @property
    def frames(self) -> int:
        """Frames yielded so far."""
        return self._frames

    def __iter__(self) -> Iterator[TensorDictBase]:
        """Yields batches until ``total_frames`` frames were collected."""
        self._check_open()
        return self._iterate()

    def iterator(self) -> Iterator[TensorDictBase]:
        """A new iterator over the batches (torchrl 0.4's name for ``iter(collector)``)."""
        return iter(self)

    def next(self) -> TensorDictBase | None:
        """The next batch, or None once ``total_frames`` frames were collected.

        Successive calls share one iterator (made on the first call), so they continue
        each other; ``for batch in collector`` starts an iterator of its own. A call that
        raises drops that iterator, so the next call starts a new one (never a silent None).
        """
        self._check_open()
        if self._iterator is None:
            self._iterator = iter(self)
        try:
            return next(self._iterator, None)
        except BaseException:
            self._iterator = None
            raise

    def _iterate(self) -> Iterator[TensorDictBase]:
        raise NotImplementedError

    def shutdown(self) -> None:
        """Stops collecting; iterating afterwards raises a RuntimeError."""
        raise NotImplementedError

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(SHUT_DOWN.format(cls=type(self).__name__))
