"""`NextObservationDelta`: next observations stored as low-precision deltas."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import torch
from tensordict import NestedKey, TensorDictBase, unravel_key

from ._base import Transform, _as_key_list

__all__ = ["NextObservationDelta"]

DELTA_DTYPE_ERROR = "delta_dtype must be a floating-point dtype, got {dtype}."
RESTORE_DTYPE_ERROR = "restore_dtype must be a floating-point dtype or 'root', got {dtype!r}."
BATCHED_WORKER_ERROR = (
    "{cls} cannot live inside a SerialEnv/ParallelEnv worker: the post-step-mdp delta key drop "
    "relies on the outer env's `step_and_maybe_reset` invoking the hook, but a batched env's "
    "`step_and_maybe_reset` does not propagate the worker's transform hook. Place the transform "
    "OUTSIDE the batched env instead, e.g. `TransformedEnv(ParallelEnv(N, base_env_factory), "
    "{cls}(...))`."
)
_INTEGER_DTYPES = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.bool)


def _tuple(key: NestedKey) -> tuple[str, ...]:
    return (key,) if isinstance(key, str) else tuple(key)


class NextObservationDelta(Transform):
    """Stores `("next", k)` as `("next", "delta", k) = (next_obs - obs)` in a low precision.

    Env side: each step writes the delta (computed in the observation's precision, then cast
    to `delta_dtype`); `_post_step_mdp_hooks(transition, next_root)` then drops the full
    `("next", k)` from the transition once `step_mdp` has moved it to the next root (the
    policy keeps seeing full-precision observations). Data side (`t(td)`, a replay-buffer
    sample): `("next", k) = td[k] + td["next", "delta", k]` (cast to `restore_dtype`), the delta
    dropped unless `drop_delta=False`. The compression is lossy.

    In an env, `TransformedEnv.fake_tensordict()` shows the compressed layout and
    `TransformedEnv._post_step_mdp_hooks` runs the drop; current torchrl calls that hook from
    ``step_and_maybe_reset`` and ``rollout``, which rlcore's env loop does not do yet: there
    the transitions keep the full ``("next", k)`` next to its delta (nothing is lost).
    Batched envs should call `TransformedEnv._check_batched_worker_compat()` on their sub-envs
    to refuse this transform inside a worker, as torchrl's do; rlbatched does not call it yet.

    Without `in_keys`, every floating observation of the env (dtypes not in `excluded_dtypes`)
    is compressed; on stored data `in_keys` must be given.

    Args:
        in_keys: the observations to compress (default: inferred from the env).
        delta_dtype: the dtype of the deltas (floating; default `torch.float16`).
        restore_dtype: the dtype of restored observations, or `"root"` (that of `td[k]`).
        drop_delta: remove the delta after restoring (default True).
        excluded_dtypes: dtypes never compressed when inferring `in_keys`.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = NextObservationDelta(in_keys=["obs"])
        >>> delta = torch.tensor([0.5], dtype=torch.float16)
        >>> td = TensorDict({"obs": torch.tensor([1.0]), ("next", "delta", "obs"): delta})
        >>> t(td)["next", "obs"], ("next", "delta", "obs") in td.keys(True)
        (tensor([1.5000]), False)
    """

    def __init__(
        self,
        in_keys: Sequence[NestedKey] | NestedKey | None = None,
        *,
        delta_dtype: torch.dtype = torch.float16,
        restore_dtype: torch.dtype | Literal["root"] = "root",
        drop_delta: bool = True,
        excluded_dtypes: tuple[torch.dtype, ...] = _INTEGER_DTYPES,
    ) -> None:
        if not delta_dtype.is_floating_point:
            raise ValueError(DELTA_DTYPE_ERROR.format(dtype=delta_dtype))
        if restore_dtype != "root" and not (
            isinstance(restore_dtype, torch.dtype) and restore_dtype.is_floating_point
        ):
            raise ValueError(RESTORE_DTYPE_ERROR.format(dtype=restore_dtype))
        super().__init__(in_keys=in_keys, out_keys=in_keys)
        self.delta_dtype = delta_dtype
        self.restore_dtype = restore_dtype
        self.drop_delta = drop_delta
        self.excluded_dtypes = tuple(excluded_dtypes)

    @property
    def in_keys(self) -> list[NestedKey]:
        """The compressed observations (inferred from the env's floating observations if unset)."""
        keys = self.__dict__.get("_in_keys")
        if keys is None:
            parent = self.parent
            if parent is None:
                return []
            spec = parent.output_spec["full_observation_spec"]
            keys = [
                unravel_key(key)
                for key, leaf in spec.items(True, True)
                if leaf.dtype is not None
                and leaf.dtype.is_floating_point
                and leaf.dtype not in self.excluded_dtypes
            ]
            self.__dict__["_in_keys"] = keys
        return keys

    @in_keys.setter
    def in_keys(self, value: Sequence[NestedKey] | NestedKey | None) -> None:
        self.__dict__["_in_keys"] = _as_key_list(value)

    @property
    def out_keys(self) -> list[NestedKey]:
        return list(self.in_keys)

    @out_keys.setter
    def out_keys(self, value: Sequence[NestedKey] | NestedKey | None) -> None:
        return  # always the in_keys

    # ------------------------------------------------------------------ env side
    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        for key in self.in_keys:
            obs = tensordict.get(key, None)
            next_obs = next_tensordict.get(key, None)
            if obs is None or next_obs is None:
                continue
            # subtract in the source precision, cast once (no cancellation in low precision)
            delta = (next_obs - obs).to(self.delta_dtype)
            next_tensordict.set(("delta", *_tuple(key)), delta)
        return next_tensordict

    def _post_step_mdp_hooks(
        self, tensordict: TensorDictBase, tensordict_: TensorDictBase
    ) -> tuple[TensorDictBase, TensorDictBase]:
        """After `step_mdp`: drop the full next observations from the transition `tensordict`."""
        next_td = tensordict.get("next", None)
        if next_td is None:
            return tensordict, tensordict_
        for key in self.in_keys:
            if next_td.get(key, None) is not None:
                next_td.pop(key)
        return tensordict, tensordict_

    def transform_fake_tensordict(self, fake_tensordict: TensorDictBase) -> TensorDictBase:
        """A fake transition laid out as the env side leaves it: deltas, no full next obs."""
        next_td = fake_tensordict.get("next", None)
        if next_td is None:
            return fake_tensordict
        for key in self.in_keys:
            leaf = next_td.get(key, None)
            if leaf is None:
                continue
            next_td.set(("delta", *_tuple(key)), leaf.to(self.delta_dtype))
            next_td.pop(key)
        return fake_tensordict

    def _check_batched_worker_compat(self) -> None:
        """Raise: the transform must wrap a batched env, not live in its workers."""
        raise RuntimeError(BATCHED_WORKER_ERROR.format(cls=type(self).__name__))

    # ------------------------------------------------------------------ data side
    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Restore `("next", k)` from `td[k]` and the stored delta (keys lacking one: skipped)."""
        for key in self.in_keys:
            key = _tuple(key)
            delta_key = ("next", "delta", *key)
            obs = tensordict.get(key, None)
            delta = tensordict.get(delta_key, None)
            if obs is None or delta is None:
                continue
            dtype = obs.dtype if self.restore_dtype == "root" else self.restore_dtype
            tensordict.set(("next", *key), obs.to(dtype) + delta.to(dtype))
            if self.drop_delta:
                tensordict.pop(delta_key)
        return tensordict

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(in_keys={self.__dict__.get('_in_keys')}, "
            f"delta_dtype={self.delta_dtype})"
        )
