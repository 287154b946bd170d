"""`VecNormV2`: running mean/variance normalisation, kept in the transform or in the data."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from tensordict import NestedKey, TensorDict, TensorDictBase, unravel_key

from rlcore import keep_shared
from rlspecs import Bounded, Composite, TensorSpec, Unbounded

from ._base import Transform, _spec_keys
from ._compose import Compose
from ._process_lock import _ProcessLock

__all__ = ["VecNormV2"]

REDUCE_STATELESS_ERROR = "reduce_batch_dims=True and stateful=False are not supported."
SHARED_DATA_STATELESS_ERROR = "VecNormV2: shared_data is only supported with stateful=True."
STATELESS_ERROR = "{what} cannot be computed with stateless vecnorm."
NOT_INITIALIZED_ERROR = "VecNormV2 must be initialized before calling {what}."
FROZEN_COPY_STATELESS_ERROR = "Cannot create a frozen copy of a statelss VecNorm."
FROZEN_COPY_INIT_ERROR = "Make sure the VecNorm has been initialized before creating a frozen copy."
DENORM_STATELESS_ERROR = "denorm is not implemented for stateless VecNormV2."
OBSNORM_STATELESS_ERROR = "to_observation_norm is not implemented for stateless VecNormV2."
VOID_STATE_ERROR = (
    "set_extra_state() called with a void state-dict while the instance is initialized."
)
MISSING_ERROR = "VecNormV2: {keys} not found in the tensordict (keys: {present})"
SEP = ".-|-."  # torchrl's separator of flattened state keys


def _float(x: torch.Tensor) -> torch.Tensor:
    return x if x.dtype.is_floating_point else x.to(torch.get_default_dtype())


class VecNormV2(Transform):
    """Normalises entries with running estimates of their mean and variance (torchrl's v2 API).

    Stateful (default): `loc` (running mean), `var` (running mean of squares) and `count` are
    kept in the transform, per entry and, unless `reduce_batch_dims`, per sub-env (the stats
    have the batch dims of the data). Each step and reset updates them (unless `freeze()`-d):
    `loc.lerp_(x, w)`, `var.lerp_(x ** 2, w)` with `w = 1 - decay` (`1 / count` when
    `decay=1`), then outputs `(x - loc') / sqrt(var' - loc'^2)` with the bias correction
    `1 - decay ** count`. With `reduce_batch_dims`, a batch counts as `numel` samples of its
    mean. The stats are updated under a process-shared lock; an `EnvCreator` shares them with
    every env it builds (fork, spawn, forkserver alike).

    Stateless (`stateful=False`): the stats travel in the data, under `"_vecnorm_loc"`,
    `"_vecnorm_var"` and `"_vecnorm_count"` (observation entries of the env).

    Args:
        in_keys: the entries to normalise.
        out_keys: where to write them (default: `in_keys`).
        lock: a lock guarding the updates (default: a process-shared lock).
        stateful: keep the stats in the transform (True) or in the data (False).
        decay: the weight kept by the running estimates at each update (default 0.9999).
        eps: the lower bound of the scale (default 1e-4).
        shared_data: stats to use (`{"loc", "var", "count"}` tensordicts), stateful only.
        reduce_batch_dims: one set of stats for all sub-envs (stateful only).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = VecNormV2(in_keys=["obs"], decay=1.0)
        >>> out = t(TensorDict(obs=torch.tensor([2.0]), batch_size=[]))
        >>> t.loc["obs"], t._count["obs"]
        (tensor([2.]), tensor(1))
    """

    def __init__(
        self,
        in_keys: Sequence[NestedKey] | NestedKey,
        out_keys: Sequence[NestedKey] | NestedKey | None = None,
        *,
        lock: Any | None = None,
        stateful: bool = True,
        decay: float = 0.9999,
        eps: float = 1e-4,
        shared_data: TensorDictBase | None = None,
        reduce_batch_dims: bool = False,
    ) -> None:
        if reduce_batch_dims and not stateful:
            raise RuntimeError(REDUCE_STATELESS_ERROR)
        if shared_data is not None and not stateful:
            raise NotImplementedError(SHARED_DATA_STATELESS_ERROR)
        super().__init__(in_keys=in_keys, out_keys=in_keys if out_keys is None else out_keys)
        self.stateful = stateful
        self.lock = _ProcessLock() if lock is None else lock
        self.decay = decay
        self.eps = eps
        self.frozen = False
        self.reduce_batch_dims = reduce_batch_dims
        self._cast_int_to_float = False
        self.prefix = "_vecnorm"
        self._loc: TensorDictBase | None = None
        self._var: TensorDictBase | None = None
        self._count: TensorDictBase | None = None
        if shared_data is not None:
            self._loc, self._var = shared_data["loc"], shared_data["var"]
            self._count = shared_data["count"]

    @property
    def initialized(self) -> bool:
        """Whether the stats exist (stateful mode)."""
        return self._loc is not None

    @property
    def _stat_keys(self) -> list[NestedKey]:
        return [f"{self.prefix}_loc", f"{self.prefix}_var", f"{self.prefix}_count"]

    # ------------------------------------------------------------------ statistics
    def _zero_stats(self, data: TensorDictBase) -> tuple[TensorDict, TensorDict, TensorDict]:
        data = data.apply(_float)
        if self.reduce_batch_dims and data.batch_dims:
            data = data.mean(dim=tuple(range(data.batch_dims)))
        loc = data.apply(torch.zeros_like)
        count = TensorDict(
            {k: torch.zeros((), dtype=torch.int64) for k in loc.keys(True, True)},
            batch_size=[],
            device=loc.device,
        )
        return loc, loc.clone(), count

    def _init_stateful(self, data: TensorDictBase) -> None:
        loc, var, count = self._zero_stats(data.select(*self.in_keys))
        self._loc, self._var, self._count = loc, var, count

    def _add_stats_for(self, data: TensorDictBase, keys: list[NestedKey]) -> None:
        """Zero stats for entries first seen now (e.g. a reward after a reset, outside an env)."""
        known = _spec_keys(self._loc)
        new = [key for key in keys if unravel_key(key) not in known]
        if new:
            loc, var, count = self._zero_stats(data.select(*new))
            self._loc = self._loc.clone(False).update(loc)
            self._var = self._var.clone(False).update(var)
            self._count = self._count.clone(False).update(count)

    def _update(
        self, data: TensorDictBase, loc: TensorDictBase, var: TensorDictBase, count: TensorDictBase
    ) -> None:
        """Update `loc`, `var` and `count` in place with `data` (entries of `loc` only)."""
        for key in data.keys(True, True):
            value = _float(data.get(key))
            n_key = count.get(key)
            if self.reduce_batch_dims and data.batch_dims:
                dims = tuple(range(data.batch_dims))
                n = data.batch_size.numel()
                n_key.add_(n)
                mean, mean_sq = value.mean(dims), value.pow(2).mean(dims)
                weight = 1 - self.decay**n if self.decay != 1.0 else n / n_key
            else:
                n_key.add_(1)
                mean, mean_sq = value, value.pow(2)
                weight = 1 - self.decay if self.decay != 1.0 else 1 / n_key
            loc_key, var_key = loc.get(key), var.get(key)
            weight = torch.as_tensor(weight, dtype=loc_key.dtype, device=loc_key.device)
            loc_key.lerp_(mean.to(loc_key.device, loc_key.dtype), weight)
            var_key.lerp_(mean_sq.to(var_key.device, var_key.dtype), weight)

    def _loc_scale_of(
        self, key: NestedKey, loc: TensorDictBase, var: TensorDictBase, count: TensorDictBase
    ) -> tuple[torch.Tensor, torch.Tensor]:
        mean, mean_sq, n = loc.get(key), var.get(key), count.get(key)
        if self.decay < 1.0:
            correction = (1 - (n * math.log(self.decay)).exp()).to(mean.dtype)
        else:
            correction = 1
        variance = (mean_sq - mean.pow(2)) / correction
        return mean / correction, variance.sqrt().clamp_min(self.eps)

    def _norm(
        self, data: TensorDictBase, loc: TensorDictBase, var: TensorDictBase, count: TensorDictBase
    ) -> TensorDictBase:
        out = data.empty()
        for in_key, out_key in zip(self._data_keys, self.out_keys):
            value = data.get(in_key, None)
            if value is None:
                continue
            mean, scale = self._loc_scale_of(in_key, loc, var, count)
            value = _float(value)
            out.set(out_key, (value - mean.to(value.device)) / scale.to(value.device))
        return out

    @property
    def _data_keys(self) -> list[NestedKey]:
        return list(self.in_keys)

    # ------------------------------------------------------------------ data path
    def _select(self, tensordict: TensorDictBase) -> TensorDictBase:
        present = [k for k in self.in_keys if tensordict.get(k, None) is not None]
        if len(present) != len(self.in_keys) and not self.missing_tolerance:
            missing = [k for k in self.in_keys if k not in present]
            raise KeyError(
                MISSING_ERROR.format(
                    keys=missing, present=sorted(map(str, tensordict.keys(True, True)))
                )
            )
        return tensordict.select(*present)

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        with self.lock:
            data = self._select(next_tensordict)
            if data.is_empty():
                return next_tensordict
            if self.stateful:
                if self._loc is None:
                    self._init_stateful(data)
                keys = list(data.keys(True, True))
                self._add_stats_for(data, keys)
                loc, var, count = (s.select(*keys) for s in (self._loc, self._var, self._count))
                if not self.frozen:
                    self._update(data, loc, var, count)
                normed = self._norm(data, loc, var, count)
            else:
                loc, var, count = (s.clone() for s in self._stateless_stats(tensordict, data))
                if not self.frozen:
                    self._update(data, loc, var, count)
                normed = self._norm(data, loc, var, count)
                for key, value in zip(self._stat_keys, (loc, var, count)):
                    normed.set(key, value)
        next_tensordict.update(normed)
        return next_tensordict

    def _stateless_stats(
        self, tensordict: TensorDictBase, data: TensorDictBase
    ) -> tuple[TensorDictBase, ...]:
        """The stats carried by `tensordict` (zeros when it has none yet)."""
        stats = [tensordict.get(key, None) for key in self._stat_keys]
        if any(s is None for s in stats):
            # every entry gets stats at once (a reset has no reward): zeros shaped by the specs
            template = self.__dict__.get("_template")
            loc, var, _ = self._zero_stats(data if template is None else template)
            count = loc.apply(lambda x: torch.zeros_like(x, dtype=torch.int64))
            return loc, var, count
        return tuple(stats)

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        # reset observations are normalised (and counted) too; rewards are missing there
        with self._tolerate_missing():
            return self._step(tensordict_reset, tensordict_reset)

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Normalise `tensordict`'s entries (and update the stats unless frozen)."""
        return self._step(tensordict, tensordict)

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        return self._step(next_tensordict, next_tensordict)

    # ------------------------------------------------------------------ modes and copies
    def freeze(self) -> VecNormV2:
        """Stop updating the stats (they still normalise)."""
        self.frozen = True
        return self

    def unfreeze(self) -> VecNormV2:
        """Update the stats again."""
        self.frozen = False
        return self

    def clone(self) -> VecNormV2:
        """A copy with its own copy of the stats (and no container)."""
        other = super().clone()
        if self._loc is not None:
            other._loc, other._var = self._loc.clone(), self._var.clone()
            other._count = self._count.clone()
        return other

    def frozen_copy(self) -> VecNormV2:
        """A frozen copy holding a snapshot of the stats."""
        if not self.stateful:
            raise RuntimeError(FROZEN_COPY_STATELESS_ERROR)
        if self._loc is None:
            raise RuntimeError(FROZEN_COPY_INIT_ERROR)
        return self.clone().freeze()

    def _get_loc_scale(self) -> tuple[TensorDict, TensorDict]:
        if not self.stateful:
            raise RuntimeError(STATELESS_ERROR.format(what="loc/scale"))
        if self._loc is None:
            raise RuntimeError(NOT_INITIALIZED_ERROR.format(what="loc/scale"))
        loc, scale = self._loc.empty(), self._loc.empty()
        for key in self._loc.keys(True, True):
            mean, std = self._loc_scale_of(key, self._loc, self._var, self._count)
            loc.set(key, mean)
            scale.set(key, std)
        return loc, scale

    @property
    def loc(self) -> TensorDict:
        """The bias-corrected running means (per in_key), for an affine normalisation."""
        if not self.stateful:
            raise RuntimeError(STATELESS_ERROR.format(what="loc"))
        return self._get_loc_scale()[0]

    @property
    def scale(self) -> TensorDict:
        """The running standard deviations (per in_key), for an affine normalisation."""
        if not self.stateful:
            raise RuntimeError(STATELESS_ERROR.format(what="scale"))
        return self._get_loc_scale()[1]

    @property
    def standard_normal(self) -> bool:
        """Always True: outputs are `(x - loc) / scale`, as `ObservationNorm(standard_normal=True)`."""
        return True

    def denorm(self, tensordict: TensorDictBase) -> TensorDictBase:
        """A shallow copy of `tensordict` with the out_keys' values mapped back to the in_keys."""
        if not self.stateful:
            raise NotImplementedError(DENORM_STATELESS_ERROR)
        if self._loc is None:
            raise RuntimeError(NOT_INITIALIZED_ERROR.format(what="denorm"))
        tensordict = tensordict.copy()
        loc, scale = self._get_loc_scale()
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            value = tensordict.get(out_key, None)
            if value is not None:
                tensordict.set(in_key, value * scale.get(in_key) + loc.get(in_key))
        return tensordict

    def to_observation_norm(self) -> Transform:
        """A fixed `ObservationNorm` per key (a `Compose` of them for several keys)."""
        if not self.stateful:
            raise NotImplementedError(OBSNORM_STATELESS_ERROR)
        from . import ObservationNorm  # the package's name, wherever the module defining it

        loc, scale = self._get_loc_scale()
        norms = [
            ObservationNorm(
                loc=loc.get(in_key).clone(),
                scale=scale.get(in_key).clone(),
                standard_normal=True,
                in_keys=[in_key],
                out_keys=[out_key],
            )
            for in_key, out_key in zip(self.in_keys, self.out_keys)
        ]
        return norms[0] if len(norms) == 1 else Compose(*norms)

    # ------------------------------------------------------------------ specs
    def _normalised_spec(self, spec: TensorSpec) -> TensorSpec:
        if isinstance(spec, Composite):
            return Composite(
                {k: self._normalised_spec(v) for k, v in spec.items()},
                shape=spec.shape,
                device=spec.device,
            )
        dtype = spec.dtype
        if dtype is not None and not dtype.is_floating_point:
            dtype = torch.get_default_dtype()
            self._cast_int_to_float = True
        if isinstance(spec, Bounded) or dtype != spec.dtype:
            return Unbounded(shape=spec.shape, device=spec.device, dtype=dtype)
        return spec.clone()

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        known: dict[NestedKey, TensorSpec] = {}
        for group in ("full_observation_spec", "full_reward_spec"):
            if group not in output_spec.keys():
                continue
            spec = output_spec[group]
            keys = _spec_keys(spec)
            for in_key, out_key in zip(self.in_keys, self.out_keys):
                if in_key in keys:
                    known[in_key] = spec[in_key]
                    spec[out_key] = self._normalised_spec(spec[in_key])
        if known:
            # the stats take the shapes of the data: zeros from the specs
            probe = TensorDict(
                {key: leaf.zero() for key, leaf in known.items()}, batch_size=output_spec.shape
            )
            self.__dict__["_template"] = probe
            if self.stateful and self._loc is None:
                self._init_stateful(probe)
        if not self.stateful and known:
            obs = output_spec["full_observation_spec"]
            stats = Composite(
                {key: self._normalised_spec(leaf) for key, leaf in known.items()},
                shape=output_spec.shape,
                device=output_spec.device,
            )
            counts = Composite(
                {
                    key: Unbounded(shape=leaf.shape, dtype=torch.int64, device=leaf.device)
                    for key, leaf in known.items()
                },
                shape=output_spec.shape,
                device=output_spec.device,
            )
            loc_key, var_key, count_key = self._stat_keys
            obs[loc_key], obs[var_key], obs[count_key] = stats, stats.clone(), counts
        return output_spec

    # ------------------------------------------------------------------ state
    def get_extra_state(self) -> TensorDict | dict:
        if not self.stateful or self._loc is None:
            return {}
        return TensorDict(loc=self._loc, var=self._var, count=self._count)

    def set_extra_state(self, state: Mapping | TensorDictBase) -> None:
        """Load the stats: shared ones are adopted (shared with their source), others copied."""
        if not self.stateful:
            return
        empty = state.is_empty() if isinstance(state, TensorDictBase) else not state
        if empty:
            if self._loc is None:
                return
            raise RuntimeError(VOID_STATE_ERROR)
        if isinstance(state, TensorDictBase):
            td = state
        else:  # torchrl's layout: flat keys joined by SEP
            td = TensorDict({tuple(k.split(SEP)): v for k, v in state.items()}, batch_size=[])
        shared = all(v.is_shared() for v in td.values(True, True))
        if not shared:
            td = td.clone()
        self._loc, self._var, self._count = td["loc"], td["var"], td["count"]

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        for name in ("_loc", "_var", "_count"):
            value = state.get(name)
            if isinstance(value, TensorDictBase) and value.is_shared():
                state[name] = keep_shared(value)  # the same stats in a process being started
        return state

    def __repr__(self) -> str:
        return (
            f"VecNormV2(in_keys={self.in_keys}, out_keys={self.out_keys}, "
            f"stateful={self.stateful}, decay={self.decay}, eps={self.eps})"
        )
