"""How ``rollout`` records its steps: per-leaf lists stacked at the end, or preallocated buffers.

The layout of the first transition (leaf names, sub-tensordicts, batch sizes) is read once;
every later step's leaves are gathered in that order in one C call per tensordict level and
kept as one tuple per step. Each leaf is then recorded in one of two ways, chosen at the first
step from its shape (``buffered``):

- **a list** (most leaves): the leaf stays referenced until the end, when each leaf's steps
  are stacked once into ``[*batch, T, ...]``. The stack writes its output sequentially and
  reads each step's tensor once, which for leaves with short rows (a row: the bytes of one
  batch element at one step), such as ``[*batch, 3]`` observations, is the cheapest way to
  build a batch-major trajectory: copying each step into its ``[:, t]`` slice writes one
  short run per batch row instead, 1.1 to 1.3 times slower for 12-byte rows at every batch
  size measured, and the per-step copy (about 1 µs a leaf) outweighs what it saves below a
  few hundred KiB a step.
- **a buffer** (rows of at least ``ROW_MIN_BYTES`` and steps of at least ``STEP_MIN_BYTES``,
  on the CPU: images, wide vectors at large batches): the ``[*batch, capacity, ...]`` output
  is allocated at the first step (``capacity`` = ``max_steps`` when the rollout cannot stop
  early, otherwise ``FIRST_CAPACITY`` steps, doubled as needed) and each step is copied into
  its time slice, every buffered leaf in one fused ``copy_``, while the step's data is still
  hot in cache (one step later, so that what a callback or the next policy call changes in
  place is recorded as a list would record it). No final stack, and the env's allocations are
  recycled at every step instead of being held, and page-faulted afresh, for the whole
  rollout: 0.35 to 0.55 times the time of a list for steps of 1 to 4 MiB (measured).

A root leaf that is the very tensor of the previous step's ``"next"`` leaf (an observation, a
done flag: ``step_mdp`` moves them up without copying) is neither stacked nor copied: it is
filled at the end from the ``"next"`` output shifted by one step, one sequential copy per run
of such steps. Large integer lists are stacked through a float view of the same width (torch's
fast serial ``cat`` only handles floating types; copies move bits unchanged), and outputs of
32 MiB or more are allocated on huge pages where the system gives them (``rlcore._memory``).

Every choice returns the same tensordict: same values, keys, shapes, dtypes, strides, names
and devices, dense and contiguous. A step whose buffered leaves change shape, strides, dtype or
device, or need gradients, turns the buffers back into lists (of tensors with the strides the
env gave them), so that the final stack decides exactly as it always did. When a step does not
match the first step's layout (new keys, lazy stacks, non-tensor data), recording falls back to
whole tensordicts, stacked densely or lazily (``return_contiguous=False``).

The switch-over and its measurements: docs/pages/performance.md
(``python benchmarks/bench_scale.py --switch-over`` reproduces them).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from tensordict import LazyStackedTensorDict, TensorDict, TensorDictBase, is_tensor_collection

from rlcore import _memory
from rlcore._step_mdp import tuple_getter
from rlspecs.private_apis import foreach_copy_, td_entries, td_new

__all__ = ["Recorder", "buffered"]

# A leaf is buffered (rather than listed) from these sizes on: its row (one batch element at
# one step) and its whole step, in bytes. Measured on the CPU: docs/pages/performance.md.
ROW_MIN_BYTES = 32
STEP_MIN_BYTES = 512 * 1024
# Bytes per step of a root leaf from which it is derived from its "next" leaf, not stacked.
DERIVE_MIN_BYTES = 0
# Bytes per step of an integer leaf from which it is stacked through a float view (below, the
# view of every step, about 0.5 µs, costs more than the faster kernel saves).
FLOAT_VIEW_MIN_BYTES = 64 * 1024
# First capacity (in steps) of the buffers when the rollout may stop early.
FIRST_CAPACITY = 32


class _Layout:
    """The structure of a plain tensordict: leaf names, sub-tensordicts, batch size, device."""

    __slots__ = ("size", "leaves", "children", "batch_size", "device", "getter")

    def __init__(self, size, leaves, children, batch_size, device) -> None:
        self.size = size
        self.leaves = leaves
        self.children = children
        self.batch_size = batch_size
        self.device = device
        # the leaves of a storage dict, as a tuple, in one C call (KeyError if one is missing)
        self.getter = tuple_getter(leaves)


def _layout(td: Any) -> _Layout | None:
    if type(td) is not TensorDict:
        return None
    entries = td_entries(td)
    leaves, children = [], []
    for key, value in entries.items():
        if type(value) is TensorDict:
            sub = _layout(value)
            if sub is None:
                return None
            children.append((key, sub))
        elif isinstance(value, torch.Tensor) and not is_tensor_collection(value):
            leaves.append(key)
        else:
            return None
    return _Layout(len(entries), tuple(leaves), tuple(children), td.batch_size, td.device)


def _paths(layout: _Layout, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """The leaf paths of ``layout`` in the order ``_gather`` lists the values."""
    paths = [(*prefix, key) for key in layout.leaves]
    for key, sub in layout.children:
        paths += _paths(sub, (*prefix, key))
    return paths


def _gather(td: Any, layout: _Layout) -> tuple | None:
    """The leaves of ``td`` in ``layout``'s order; None when ``td`` does not have that layout."""
    if type(td) is not TensorDict:
        return None
    entries = td_entries(td)
    if len(entries) != layout.size:
        return None
    try:
        values = layout.getter(entries)
    except KeyError:
        return None
    for key, sub in layout.children:
        more = _gather(entries.get(key), sub)
        if more is None:
            return None
        values += more
    return values


def _build(layout: _Layout, values: Iterator, make: Callable, batch: Callable) -> TensorDict:
    source = {key: make(next(values)) for key in layout.leaves}
    for key, sub in layout.children:
        source[key] = _build(sub, values, make, batch)
    return td_new(source, batch(layout.batch_size), layout.device)


def _same(value: Any) -> Any:
    return value


# Integer dtypes stacked through a float view of the same width: torch's serial CPU ``cat``
# kernel (one thread, contiguous inputs) only handles floating types and is several times
# faster than the strided copy it otherwise falls back to. Copies move bits unchanged.
_FLOAT_VIEWS = {torch.int64: torch.float64, torch.int32: torch.float32, torch.int16: torch.float16}


def _stack(values: Sequence[torch.Tensor], dim: int) -> torch.Tensor:
    """``torch.stack(values, dim)``; on the CPU, through a float view for integer steps of
    ``FLOAT_VIEW_MIN_BYTES`` or more, and onto huge pages when the output is large (both after
    checking the inputs: one dtype, as the view and ``out=`` need, and no gradients)."""
    first = values[0]
    step = first.numel() * first.element_size()
    view = _FLOAT_VIEWS.get(first.dtype) if step >= FLOAT_VIEW_MIN_BYTES else None
    if (
        first.device.type != "cpu"
        or (view is None and step * len(values) < _memory.MIN_BYTES)
        or len({value.dtype for value in values}) != 1  # type promotion: torch.stack's own
        or any(value.requires_grad for value in values)  # out= does not support autograd
    ):
        return torch.stack(values, dim)
    out = _memory.empty((*first.shape[:dim], len(values), *first.shape[dim:]), first.dtype)
    if view is None:
        torch.stack(values, dim, out=out)
    else:
        torch.stack([value.view(view) for value in values], dim, out=out.view(view))
    return out


def _runs(flags: bytearray, count: int, value: int) -> Iterator[tuple[int, int]]:
    """The ``[start, stop)`` ranges of steps below ``count`` whose flag is ``value``."""
    start = flags.find(value, 0, count)
    while start != -1:
        stop = flags.find(1 - value, start, count)
        if stop == -1:
            stop = count
        yield start, stop
        start = flags.find(value, stop, count)


def _pairs(layout: _Layout, values: list[torch.Tensor]) -> dict[int, int]:
    """Root leaf index -> index of the same leaf under ``"next"`` (same shape and dtype)."""
    index = {path: i for i, path in enumerate(_paths(layout))}
    pairs = {}
    for path, i in index.items():
        j = index.get(("next", *path)) if path[0] != "next" else None
        if j is not None and values[i].shape == values[j].shape:
            if values[i].dtype is values[j].dtype:
                pairs[i] = j
    return pairs


def _derived_steps(column: Sequence, source: Sequence) -> bytearray | None:
    """Flags of the steps whose root leaf is the previous step's ``"next"`` leaf, when those
    make the bulk of a large enough column (None otherwise)."""
    first = column[0]
    if not isinstance(first, torch.Tensor):
        return None
    if first.numel() * first.element_size() < DERIVE_MIN_BYTES:
        return None
    flags = bytearray(map(operator.is_, column[1:], source[:-1]))
    if 2 * flags.count(1) < len(flags):
        return None
    return b"\x00" + flags


def _derivable(column: Sequence, flags: bytearray, source: torch.Tensor, dim: int) -> bool:
    """Whether the steps not derived (step 0 at least) match the stacked ``"next"`` leaf in
    shape, dtype and device, without gradients: the root stack would then be exactly
    ``source`` shifted (the derived steps are ``source``'s own tensors)."""
    if source.requires_grad:
        return False
    shape = source.shape[:dim] + source.shape[dim + 1 :]
    for start, stop in _runs(flags, len(flags), 0):
        for value in column[start:stop]:
            if not (
                isinstance(value, torch.Tensor)
                and value.shape == shape
                and value.dtype is source.dtype
                and value.device == source.device
                and not value.requires_grad
            ):
                return False
    return True


def _derive(
    target: torch.Tensor,
    source: torch.Tensor,
    flags: bytearray,
    count: int,
    dim: int,
    rest: Callable[[int, int], torch.Tensor],
) -> None:
    """Fills ``target`` (``[*batch, count, ...]``): ``source`` one step earlier where ``flags``
    are set, ``rest(start, stop)`` (time along ``dim``) elsewhere."""
    for start, stop in _runs(flags, count, 1):
        target.narrow(dim, start, stop - start).copy_(source.narrow(dim, start - 1, stop - start))
    for start, stop in _runs(flags, count, 0):
        target.narrow(dim, start, stop - start).copy_(rest(start, stop))


def _meta(value: torch.Tensor) -> tuple:
    return value.shape, value.dtype, value.get_device(), value.stride()


def _fits(value: torch.Tensor, meta: tuple) -> bool:
    shape, dtype, device, stride = meta
    return (
        isinstance(value, torch.Tensor)
        and value.shape == shape
        and value.dtype is dtype
        and value.get_device() == device
        and not value.requires_grad
        and value.stride() == stride
    )


class _Buffers:
    """The ``[*batch, capacity, ...]`` outputs of the buffered leaves, written step by step."""

    def __init__(
        self, values: list[torch.Tensor], indices: list[int], dim: int, capacity: int, pairs: dict
    ) -> None:
        self.indices = indices
        self.dim = dim
        self.capacity = capacity
        self.metas = [_meta(values[i]) for i in indices]
        self.tensors = {i: self._empty(values[i], capacity) for i in indices}
        self.slots = {i: tensor.unbind(dim) for i, tensor in self.tensors.items()}
        # root leaf index -> "next" leaf index, both buffered: root steps that are the previous
        # step's "next" tensor are not copied (flagged in ``derived``, filled by ``complete``)
        self.pairs = {r: n for r, n in pairs.items() if r in self.tensors and n in self.tensors}
        self.derived = {root: bytearray(capacity) for root in self.pairs}
        self.previous: list[torch.Tensor] | None = None  # the last copied step
        self.pending: list[torch.Tensor] | None = None  # the step to copy next
        self.count = 0  # steps copied

    def _empty(self, value: torch.Tensor, steps: int) -> torch.Tensor:
        shape, dim = value.shape, self.dim
        return _memory.empty((*shape[:dim], steps, *shape[dim:]), value.dtype, value.device)

    def write(self, values: list[torch.Tensor]) -> bool:
        """Takes one step (copied at the next ``write`` or ``complete``, so that what the
        callback and the next policy call do in place is recorded as lists record it); False
        (step not taken) when a buffered leaf changed shape, dtype or device, or needs grad."""
        self.flush()
        for index, meta in zip(self.indices, self.metas):
            if not _fits(values[index], meta):
                return False
        self.pending = values
        return True

    def flush(self) -> None:
        """Copies the pending step into its slot, all buffered leaves in one call."""
        values = self.pending
        if values is None:
            return
        self.pending = None
        step = self.count
        if step == self.capacity:
            self._grow()
        previous, pairs = self.previous, self.pairs
        dsts, srcs = [], []
        for index in self.indices:
            value = values[index]
            if previous is not None and index in pairs and value is previous[pairs[index]]:
                self.derived[index][step] = 1
            else:
                dsts.append(self.slots[index][step])
                srcs.append(value)
        foreach_copy_(dsts, srcs)
        self.previous = values
        self.count = step + 1

    def _grow(self) -> None:
        size, dim = self.capacity, self.dim
        self.capacity = 2 * size
        for index, tensor in self.tensors.items():
            grown = self._empty(tensor.select(dim, 0), self.capacity)
            grown.narrow(dim, 0, size).copy_(tensor)
            self.tensors[index] = grown
            self.slots[index] = grown.unbind(dim)
        for flags in self.derived.values():
            flags.extend(bytearray(size))

    def complete(self) -> None:
        """Copies the pending step and fills the root steps that were the previous step's
        "next" tensor."""
        self.flush()
        dim = self.dim
        for root, flags in self.derived.items():
            source, target = self.tensors[self.pairs[root]], self.tensors[root]
            for start, stop in _runs(flags, self.count, 1):
                target.narrow(dim, start, stop - start).copy_(
                    source.narrow(dim, start - 1, stop - start)
                )
            flags[:] = bytearray(len(flags))

    def steps(self, index: int) -> list[torch.Tensor]:
        """The recorded steps of a buffered leaf (after ``complete``), as tensors of the
        shape and strides the env gave them (they may end up in a lazy stack)."""
        shape, dtype, _, stride = self.metas[self.indices.index(index)]
        device = self.tensors[index].device
        return [
            torch.empty_strided(shape, stride, dtype=dtype, device=device).copy_(slot)
            for slot in self.slots[index][: self.count]
        ]

    def output(self, index: int) -> torch.Tensor:
        """The ``[*batch, count, ...]`` output of a buffered leaf (after ``complete``)."""
        tensor = self.tensors[index]
        if self.count == self.capacity:
            return tensor
        cut = tensor.narrow(self.dim, 0, self.count)
        return cut.clone(memory_format=torch.contiguous_format)


def buffered(value: torch.Tensor, batch_dims: int) -> bool:
    """Whether a leaf of a rollout's first step is recorded into a buffer (else a list)."""
    if value.requires_grad or value.device.type != "cpu":
        return False
    nbytes = value.numel() * value.element_size()
    rows = value.shape[:batch_dims].numel()
    return nbytes >= STEP_MIN_BYTES and nbytes >= ROW_MIN_BYTES * rows


class Recorder:
    """Records rollout steps (see the module docstring) and stacks them along a time dim.

    Args:
        batch_dims: number of batch dims of the env (the time dim is inserted after them).
        max_steps: the most steps the rollout can record.
        exact: the rollout records exactly ``max_steps`` steps unless interrupted (buffers are
            then allocated at their final size).
        buffers: buffer every leaf (True), none (False), or choose by shape (None).
    """

    def __init__(
        self, batch_dims: int, max_steps: int, exact: bool, buffers: bool | None = None
    ) -> None:
        self.batch_dims = batch_dims
        self.max_steps = max_steps
        self.exact = exact
        self.force = buffers
        self.layout: _Layout | None = None
        self.width = 0  # leaves per step
        self.pairs: dict[int, int] = {}
        # one tuple of leaves per step (one append per step; columns are made at the end);
        # with buffers, the tuples hold only the ``listed`` leaves
        self.rows: list[tuple] | None = None
        self.listed: tuple[int, ...] = ()
        self.pick: Callable[[tuple], tuple] | None = None
        self.buffers: _Buffers | None = None
        self.tds: list[TensorDictBase] | None = None
        self.count = 0

    @property
    def strategy(self) -> str:
        """``"lists"``, ``"buffers"`` (some leaves or all), ``"tensordicts"`` (the fallback),
        or ``""`` before the first step."""
        if self.tds is not None:
            return "tensordicts"
        if self.buffers is not None:
            return "buffers"
        return "lists" if self.rows is not None else ""

    def add(self, td: TensorDictBase) -> None:
        """Records one transition."""
        self.count += 1
        if self.tds is not None:
            self.tds.append(td.copy())
            return
        if self.layout is None:
            self.layout = _layout(td)
            if self.layout is None:
                self.tds = [td.copy()]
                return
        values = _gather(td, self.layout)
        if values is None or (self.count > 1 and len(values) != self.width):
            self.tds = self._unpack() + [td.copy()]
        elif self.buffers is None:
            if self.rows is None:
                self._start(values)
            else:
                self.rows.append(values)
        elif self.buffers.write(values):
            self.rows.append(self.pick(values))
        else:
            self._to_lists()
            self.rows.append(values)

    def _start(self, values: tuple) -> None:
        self.width = len(values)
        self.pairs = _pairs(self.layout, values)
        self.rows = [values]
        if self.force is None:
            chosen = [i for i, v in enumerate(values) if buffered(v, self.batch_dims)]
        else:
            chosen = list(range(len(values))) if self.force else []
        if not chosen or any(v.requires_grad for v in values):
            return
        capacity = self.max_steps if self.exact else min(self.max_steps, FIRST_CAPACITY)
        self.buffers = _Buffers(values, chosen, self.batch_dims, capacity, self.pairs)
        self.buffers.write(values)
        self.listed = tuple(i for i in range(len(values)) if i not in self.buffers.tensors)
        self.pick = tuple_getter(self.listed)
        self.rows = [self.pick(values)]

    def _columns(self) -> list[Sequence[torch.Tensor]]:
        """Every leaf's recorded steps (buffered ones as tensors of their original strides)."""
        listed = list(zip(*self.rows)) if self.rows and self.rows[0] else []
        if self.buffers is None:
            return listed
        self.buffers.complete()
        columns: list = [None] * self.width
        for index, column in zip(self.listed, listed):
            columns[index] = column
        for index in self.buffers.indices:
            columns[index] = self.buffers.steps(index)
        return columns

    def _to_lists(self) -> None:
        self.rows = list(zip(*self._columns()))
        self.buffers = None

    def _unpack(self) -> list[TensorDictBase]:
        if self.buffers is not None:
            self._to_lists()
        return [_build(self.layout, iter(row), _same, _same) for row in self.rows or []]

    def _outputs(self) -> list[torch.Tensor]:
        """Every leaf's ``[*batch, T, ...]`` output."""
        dim, count = self.batch_dims, self.count
        outputs: dict[int, torch.Tensor] = {}
        columns: dict[int, Sequence[torch.Tensor]] = {}
        listed = list(zip(*self.rows)) if self.rows and self.rows[0] else []
        if self.buffers is None:
            columns = dict(enumerate(listed))
        else:
            self.buffers.complete()
            columns = dict(zip(self.listed, listed))
            for index in self.buffers.indices:
                outputs[index] = self.buffers.output(index)
        derived = {}
        for root, source in self.pairs.items():
            if root in columns and source in columns:
                flags = _derived_steps(columns[root], columns[source])
                if flags is not None:
                    derived[root] = flags
        for index, column in columns.items():
            if index not in derived:
                outputs[index] = _stack(column, dim)
        for root, flags in derived.items():
            source, column = outputs[self.pairs[root]], columns[root]
            if not _derivable(column, flags, source, dim):
                outputs[root] = _stack(column, dim)
                continue
            target = _memory.empty(source.shape, source.dtype, source.device)
            _derive(target, source, flags, count, dim, lambda a, b, c=column: _stack(c[a:b], dim))
            outputs[root] = target
        return [outputs[i] for i in range(self.width)]

    def result(self, return_contiguous: bool) -> TensorDictBase:
        """The recorded steps as one tensordict of shape ``[*batch, T]``, last dim ``"time"``."""
        batch_dims, steps = self.batch_dims, self.count

        def batch(size: torch.Size) -> torch.Size:
            return torch.Size((*size[:batch_dims], steps, *size[batch_dims:]))

        out = None
        if self.tds is None:
            try:
                out = _build(self.layout, iter(self._outputs()), _same, batch)
            except RuntimeError:
                if return_contiguous:
                    raise
                self.tds = self._unpack()
        if self.tds is not None:
            if return_contiguous:
                out = torch.stack(self.tds, batch_dims)
            else:
                out = LazyStackedTensorDict.maybe_dense_stack(self.tds, batch_dims)
        out.refine_names(..., "time")
        return out
