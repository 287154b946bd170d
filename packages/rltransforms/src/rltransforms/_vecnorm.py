"""`VecNorm`: running-statistics normalisation whose statistics live in shared memory."""

from __future__ import annotations

import warnings
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import torch
from tensordict import NestedKey, TensorDict, TensorDictBase, unravel_key

from rlcore import keep_shared
from rlspecs import Bounded, Composite, TensorSpec, Unbounded

from ._base import Transform, _get
from ._compose import Compose
from ._process_lock import _ProcessLock
from ._vecnorm_v2 import VecNormV2

__all__ = ["VecNorm"]

SHARED_TD_ERROR = (
    "shared_td must be either in shared memory or a memmap tensordict "
    "(call share_memory_() or memmap_() on it, or build it with "
    "VecNorm.build_td_for_shared_vecnorm)."
)
SHARED_TD_KEY_ERROR = "key {key!r} not present in the shared tensordict with keys {keys}"
SHAPES_LEN_ERROR = "VecNorm: shapes has {got} entries but in_keys has {expected}"
STATS_SHAPE_ERROR = (
    "VecNorm: {key!r} has shape {shape}, whose trailing dims do not match its statistics "
    "(shape {stats})"
)
NOT_IN_SPECS_WARNING = (
    "VecNorm: in_keys {keys} are in none of the env's observation/reward specs and will not be "
    "normalised (spec keys: {known})"
)
NOT_INITIALIZED_ERROR = (
    "VecNorm.to_observation_norm: no statistics for {key!r} yet; run the env (or call the "
    "transform on data) first"
)
BATCHED_ENV_ERROR = (
    "VecNorm.build_td_for_shared_vecnorm: keys {keys} are not in the env's specs (keys: {known})"
)


def _append_last(key: NestedKey, suffix: str) -> NestedKey:
    if isinstance(key, str):
        return key + suffix
    return (*key[:-1], key[-1] + suffix)


def _sum_left(value: torch.Tensor, dest: torch.Tensor) -> torch.Tensor:
    """Sum the leading dims of `value` until it has `dest`'s number of dims."""
    extra = value.ndim - dest.ndim
    return value.sum(tuple(range(extra))) if extra > 0 else value


def _zero_stats(key: NestedKey, shape: torch.Size, dtype: torch.dtype, device: Any) -> TensorDict:
    """`<key>_sum`, `<key>_ssq` (of the feature `shape`) and `<key>_count`, all zeros."""
    if not dtype.is_floating_point:
        dtype = torch.get_default_dtype()
    return TensorDict(
        {
            _append_last(key, "_sum"): torch.zeros(shape, dtype=dtype, device=device),
            _append_last(key, "_ssq"): torch.zeros(shape, dtype=dtype, device=device),
            _append_last(key, "_count"): torch.zeros(1, dtype=torch.float, device=device),
        },
        batch_size=[],
    )

    def __repr__(self) -> str:
        return f"_ProcessLock({self._lock!r})"


class VecNorm(Transform):
    """Normalises entries with running estimates of their mean and standard deviation.

    For each in_key, `sum`, `ssq` (sum of squares) and `count` are kept per feature (the dims
    after the batch dims) and decayed by `decay` at each update; the output is
    `(x - mean) / std` with `std = sqrt(max(ssq / count - mean**2, eps))`. Every call updates
    the statistics (in an env: every reset and step), unless the transform is `freeze()`-d.

    The statistics (`_td`, keys `<key>_sum`, `<key>_ssq`, `<key>_count`) live in shared
    memory and are updated under a process-shared lock, so that every env holding them
    contributes and reads the same values, across `ParallelEnv` workers too. They are shared by:

    - an `EnvCreator` building the envs (`ParallelEnv(n, EnvCreator(make_env))`): the first env
      built creates them, the others load them (fork, spawn and forkserver alike);
    - a VecNorm instance handed to the workers (pickled at their start, it ships handles to its
      statistics, not copies);
    - `shared_td=`, a tensordict from `build_td_for_shared_vecnorm`, given to each VecNorm.

    To stop updating them at inference time, `freeze()` the transform or replace it by
    `to_observation_norm()`.

    Args:
        in_keys: the entries to normalise (default `["observation", "reward"]`).
        out_keys: where to write them (default: `in_keys`).
        shared_td: statistics to use, in shared memory or memory-mapped.
        lock: a lock guarding the updates (default: a process-shared lock).
        decay: the decay of the running sums (default 0.9999; 1.0 gives plain averages).
        eps: the lower bound of the variance (default 1e-4).
        shapes: the feature shape of each in_key (default: read from the specs or the data).
        new_api: current torchrl's switch: True builds a `VecNormV2` with the other arguments
            (which it takes as current torchrl's does); False or None (default), this VecNorm.
            Current torchrl warns when ``new_api`` is not given; torchrl 0.4 had no such
            argument, and this class is its VecNorm, so nothing warns here.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> type(VecNorm(in_keys=["obs"], new_api=True)).__name__
        'VecNormV2'
        >>> t = VecNorm(in_keys=["obs"], decay=1.0)
        >>> out = t(TensorDict(obs=torch.tensor([[1.0], [3.0]]), batch_size=[2]))
        >>> out["obs"].squeeze(-1)
        tensor([-1.,  1.])
        >>> t._td["obs_count"]
        tensor([2.])
    """

    _call_on_reset = True  # reset observations are normalised (and counted) too

    def __new__(cls, *args: Any, new_api: bool | None = None, **kwargs: Any) -> Any:
        if new_api:
            return VecNormV2(*args, **kwargs)  # not a VecNorm: __init__ below is not run
        return super().__new__(cls)

    def __init__(
        self,
        in_keys: Sequence[NestedKey] | NestedKey | None = None,
        out_keys: Sequence[NestedKey] | NestedKey | None = None,
        shared_td: TensorDictBase | None = None,
        lock: Any | None = None,
        decay: float = 0.9999,
        eps: float = 1e-4,
        shapes: Sequence[torch.Size] | None = None,
        new_api: bool | None = None,
    ) -> None:
        super().__init__(
            in_keys=["observation", "reward"] if in_keys is None else in_keys, out_keys=out_keys
        )
        if shared_td is not None:
            if not (shared_td.is_shared() or shared_td.is_memmap()):
                raise RuntimeError(SHARED_TD_ERROR)
            keys = set(shared_td.keys(True, True))
            for key in self.in_keys:
                for suffix in ("_sum", "_ssq", "_count"):
                    if _append_last(key, suffix) not in keys:
                        raise KeyError(
                            SHARED_TD_KEY_ERROR.format(key=key, keys=sorted(map(str, keys)))
                        )
        if shapes is not None and len(shapes) != len(self.in_keys):
            raise ValueError(SHAPES_LEN_ERROR.format(got=len(shapes), expected=len(self.in_keys)))
        self._td = shared_td
        self.lock = _ProcessLock() if lock is None else lock
        self.decay = decay
        self.eps = eps
        self.shapes = None if shapes is None else [torch.Size(s) for s in shapes]
        self.frozen = False
        self._skipped: list[NestedKey] = []

    # ------------------------------------------------------------------ statistics
    def _init_stats(
        self, key: NestedKey, shape: torch.Size, dtype: torch.dtype, device: Any
    ) -> None:
        """Create zeroed statistics for `key` (in shared memory) if it has none."""
        if self._td is not None and self._td.get(_append_last(key, "_sum"), None) is not None:
            return
        if self.shapes is not None:
            shape = self.shapes[self.in_keys.index(key)]
        stats = _zero_stats(key, shape, dtype, device)
        if stats.device is None or stats.device.type == "cpu":
            stats.share_memory_()
        if self._td is None:
            self._td = stats
        else:
            # shared tensordicts are locked: a shallow copy takes the new (shared) entries
            # (share_memory_ keeps the storage of tensors already shared)
            merged = self._td.copy().unlock_()
            merged.update(stats)
            self._td = merged.share_memory_() if stats.is_shared() else merged.lock_()

    def _update(self, key: NestedKey, value: torch.Tensor) -> torch.Tensor:
        td = self._td
        _sum = td.get(_append_last(key, "_sum"))
        _ssq = td.get(_append_last(key, "_ssq"))
        _count = td.get(_append_last(key, "_count"))
        if value.shape[value.ndim - _sum.ndim :] != _sum.shape:
            raise ValueError(
                STATS_SHAPE_ERROR.format(key=key, shape=tuple(value.shape), stats=tuple(_sum.shape))
            )
        if not self.frozen:
            n = value.numel() // max(_sum.numel(), 1)
            _sum.mul_(self.decay).add_(_sum_left(value, _sum))
            _ssq.mul_(self.decay).add_(_sum_left(value.pow(2), _ssq))
            _count.mul_(self.decay).add_(n)
        mean = _sum / _count
        std = (_ssq / _count - mean.pow(2)).clamp_min(self.eps).sqrt()
        return (value - mean) / std.clamp_min(self.eps)

    # ------------------------------------------------------------------ data path
    def _call(self, tensordict: TensorDictBase) -> TensorDictBase:
        with self.lock:
            for in_key, out_key in zip(self.in_keys, self.out_keys):
                if in_key in self._skipped:
                    continue
                value = _get(tensordict, in_key)
                if value is None:
                    self._missing(in_key, tensordict)
                    continue
                nbatch = tensordict.batch_dims
                self._init_stats(in_key, value.shape[nbatch:], value.dtype, value.device)
                tensordict.set(out_key, self._update(in_key, value))
        return tensordict

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Normalise (and, unless frozen, update the statistics with) a tensordict's entries."""
        return self._call(tensordict)

    def freeze(self) -> VecNorm:
        """Stop updating the statistics (they are still used to normalise)."""
        self.frozen = True
        return self

    def unfreeze(self) -> VecNorm:
        """Update the statistics again."""
        self.frozen = False
        return self

    # ------------------------------------------------------------------ specs
    def transform_output_spec(self, output_spec: Composite) -> Composite:
        batch_ndim = len(output_spec.shape)
        known: dict[NestedKey, TensorSpec] = {}
        for group in ("full_observation_spec", "full_reward_spec"):
            if group in output_spec.keys():
                for key in output_spec[group].keys(True, True):
                    known[unravel_key(key)] = output_spec[group][key]
        self._skipped = [key for key in self.in_keys if key not in known]
        if self._skipped:
            warnings.warn(
                NOT_IN_SPECS_WARNING.format(keys=self._skipped, known=sorted(map(str, known))),
                category=UserWarning,
                stacklevel=2,
            )
        for key in self.in_keys:
            if key in known:
                leaf = known[key]
                self._init_stats(key, leaf.shape[batch_ndim:], leaf.dtype, leaf.device)
        return super().transform_output_spec(output_spec)

    def _unbounded(self, spec: TensorSpec) -> TensorSpec:
        dtype = spec.dtype if spec.dtype.is_floating_point else torch.get_default_dtype()
        if isinstance(spec, Bounded) or dtype != spec.dtype:
            return Unbounded(shape=spec.shape, dtype=dtype, device=spec.device)
        return spec.clone()

    def transform_observation_spec(self, observation_spec: TensorSpec) -> TensorSpec:
        return self._map_specs(observation_spec, self.in_keys, self.out_keys, self._unbounded)

    def transform_reward_spec(self, reward_spec: TensorSpec) -> TensorSpec:
        return self._map_specs(reward_spec, self.in_keys, self.out_keys, self._unbounded)

    # ------------------------------------------------------------------ conversions
    def to_observation_norm(self) -> Transform:
        """A fixed `ObservationNorm` per key with the current mean and std (for inference).

        One key gives an `ObservationNorm`, several a `Compose` of them.
        """
        from . import ObservationNorm  # the package's name, wherever the module defining it

        norms = []
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            if self._td is None or _append_last(in_key, "_sum") not in self._td.keys(True, True):
                raise RuntimeError(NOT_INITIALIZED_ERROR.format(key=in_key))
            _sum = self._td.get(_append_last(in_key, "_sum"))
            _ssq = self._td.get(_append_last(in_key, "_ssq"))
            _count = self._td.get(_append_last(in_key, "_count"))
            mean = _sum / _count
            std = (_ssq / _count - mean.pow(2)).clamp_min(self.eps).sqrt()
            norms.append(
                ObservationNorm(
                    loc=mean.clone(),
                    scale=std.clone(),
                    standard_normal=True,
                    in_keys=[in_key],
                    out_keys=[out_key],
                )
            )
        return norms[0] if len(norms) == 1 else Compose(*norms)

    @staticmethod
    def build_td_for_shared_vecnorm(
        env: Any, keys: Sequence[NestedKey] | None = None, memmap: bool = False
    ) -> TensorDictBase:
        """Zeroed statistics for `keys` of `env`, in shared memory (or memory-mapped).

        Give the result to each `VecNorm(shared_td=...)` that must share the statistics.

        Args:
            env: an env whose specs give the feature shapes (its batch dims are dropped).
            keys: the entries to normalise (default `["observation", "reward"]`).
            memmap: memory-map the statistics (`memmap_()`) instead of sharing them.

        Examples:
            >>> td = VecNorm.build_td_for_shared_vecnorm(env, ["observation"])
            >>> td.is_shared(), sorted(td.keys())
            (True, ['observation_count', 'observation_ssq', 'observation_sum'])
        """
        keys = ["observation", "reward"] if keys is None else [unravel_key(k) for k in keys]
        output_spec = env.output_spec
        batch_ndim = len(env.batch_size)
        known: dict[NestedKey, TensorSpec] = {}
        for group in ("full_observation_spec", "full_reward_spec"):
            for key in output_spec[group].keys(True, True):
                known[unravel_key(key)] = output_spec[group][key]
        missing = [key for key in keys if key not in known]
        if missing:
            raise KeyError(BATCHED_ENV_ERROR.format(keys=missing, known=sorted(map(str, known))))
        td = TensorDict(batch_size=[])
        for key in keys:
            leaf = known[key]
            td.update(_zero_stats(key, leaf.shape[batch_ndim:], leaf.dtype, leaf.device))
        return td.memmap_() if memmap else td.share_memory_()

    # ------------------------------------------------------------------ state
    def get_extra_state(self) -> OrderedDict:
        return OrderedDict(lock=self.lock, td=self._td)

    def set_extra_state(self, state: dict) -> None:
        """Load statistics: shared ones are adopted (shared with their source), others copied."""
        lock = state.get("lock")
        if lock is not None:
            self.lock = lock
        td = state.get("td")
        if td is None:
            return
        if td.is_shared() or td.is_memmap():
            self._td = td
        elif self._td is not None and set(self._td.keys(True, True)) == set(td.keys(True, True)):
            self._td.update_(td)
        else:
            td = td.clone()
            self._td = td.share_memory_() if td.device is None or td.device.type == "cpu" else td

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        td = state.get("_td")
        if td is not None and td.is_shared():
            state["_td"] = keep_shared(td)
        return state

    def __repr__(self) -> str:
        return f"VecNorm(decay={self.decay:4.4f}, eps={self.eps:4.4f}, keys={self.in_keys})"
