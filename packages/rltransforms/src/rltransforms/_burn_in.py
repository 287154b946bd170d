"""`BurnInTransform`: recurrent states refreshed by running modules over the first steps of
stored sequences (a replay-buffer transform)."""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import torch
from tensordict import NestedKey, TensorDictBase, unravel_key
from tensordict.nn import TensorDictModuleBase
from torch import nn

from ._base import Transform

__all__ = ["BurnInTransform"]

NOT_A_MODULE_ERROR = (
    "BurnInTransform: all modules must be TensorDictModules (tensordict.nn."
    "TensorDictModuleBase), but module {index} is a {type}"
)
BURN_IN_ERROR = "BurnInTransform: burn_in must be an int >= 0, got {value!r}"
NEXT_OUT_KEY_WARNING = (
    "The 'next' key is not needed in the BurnInTransform out_key {key!r} and will be ignored: "
    "out_keys are always read from the next time step of the burnt-in data"
)
ENV_ERROR = (
    "BurnInTransform works on stored sequences (call it on a [B, T] tensordict or append it to "
    "a replay buffer); it cannot transform env steps"
)
NO_TIME_DIM_ERROR = (
    "BurnInTransform: the tensordict needs a time dimension (its last batch dim), got "
    "batch_size={batch_size}"
)
TOO_SHORT_ERROR = (
    "BurnInTransform: burn_in={burn_in} leaves no step of the sequence: the time dim (last "
    "batch dim) of batch_size={batch_size} must be greater than {burn_in}"
)
NOT_WRITTEN_ERROR = (
    "BurnInTransform: the modules wrote no {key!r} over the burn-in steps (out_key {out_key!r}); "
    "out_keys must name entries the modules write under 'next'"
)


def _unique(keys: Sequence[NestedKey]) -> list[NestedKey]:
    """The unravelled keys in order of first appearance, without repeats."""
    seen: list[NestedKey] = []
    for key in keys:
        key = unravel_key(key)
        if key not in seen:
            seen.append(key)
    return seen


class BurnInTransform(Transform):
    """Burns in the recurrent states of stored sequences, returning the steps after the burn-in.

    Sequences sampled from a replay buffer carry recurrent states that were computed by an
    older policy. This transform runs `modules` (without gradients) over the first `burn_in`
    time steps of a tensordict whose last batch dim is time, and returns the remaining
    `T - burn_in` steps with each out_key's first step replaced by the value the modules wrote
    under `"next"` at the last burn-in step. The input tensordict is not modified.

    Args:
        modules: a TensorDictModule or a sequence (or `nn.ModuleList`) of them, run in order on
            the burn-in steps; each must process whole sequences (e.g. a recurrent module in
            recurrent mode).
        burn_in: the number of time steps to burn in (0 returns the tensordict unchanged).
        out_keys: the entries to refresh (a `("next", ...)` prefix is dropped with a warning);
            default: every module out_key under `"next"`, without its `"next"` prefix.

    Raises:
        ValueError: a module is not a TensorDictModule, `burn_in` is negative, or a tensordict
            has no time dim or no step left after the burn-in.
        RuntimeError: used as an env transform.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> cumsum = TensorDictModule(  # hidden(t+1) = hidden(0) + obs(0) + ... + obs(t)
        ...     lambda obs, hidden: hidden[:, :1] + obs.cumsum(1),
        ...     in_keys=["obs", "hidden"], out_keys=[("next", "hidden")])
        >>> t = BurnInTransform(cumsum, burn_in=3)
        >>> td = TensorDict(obs=torch.ones(2, 5, 1), hidden=torch.zeros(2, 5, 1), batch_size=[2, 5])
        >>> out = t(td)
        >>> out.batch_size, out["hidden"][:, :, 0]
        (torch.Size([2, 2]), tensor([[3., 0.],
                [3., 0.]]))
    """

    invertible = False

    def __init__(
        self,
        modules: Sequence[TensorDictModuleBase] | TensorDictModuleBase,
        burn_in: int,
        out_keys: Sequence[NestedKey] | None = None,
    ) -> None:
        if isinstance(modules, TensorDictModuleBase) or not isinstance(
            modules, (Sequence, nn.ModuleList)
        ):
            modules = [modules]
        for index, module in enumerate(modules):
            if not isinstance(module, TensorDictModuleBase):
                raise ValueError(NOT_A_MODULE_ERROR.format(index=index, type=type(module).__name__))
        if isinstance(burn_in, bool) or not isinstance(burn_in, int) or burn_in < 0:
            raise ValueError(BURN_IN_ERROR.format(value=burn_in))
        in_keys = _unique([key for module in modules for key in module.in_keys])
        if out_keys is None:
            out_keys = [
                key[1:]
                for module in modules
                for key in map(unravel_key, module.out_keys)
                if isinstance(key, tuple) and key[0] == "next"
            ]
        else:
            stripped = []
            for key in map(unravel_key, [out_keys] if isinstance(out_keys, str) else out_keys):
                if isinstance(key, tuple) and key[0] == "next":
                    warnings.warn(NEXT_OUT_KEY_WARNING.format(key=key), UserWarning, stacklevel=2)
                    key = key[1:]
                stripped.append(key)
            out_keys = stripped
        super().__init__(in_keys=in_keys, out_keys=_unique(out_keys))
        self.modules = list(modules)  # as in torchrl 0.4: a plain list, not submodules
        self.burn_in = burn_in

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        raise RuntimeError(ENV_ERROR)

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        raise RuntimeError(ENV_ERROR)

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """The steps after the burn-in, their first step holding the burnt-in out_keys."""
        if self.burn_in == 0:
            return tensordict
        batch_size = tensordict.batch_size
        if not batch_size:
            raise ValueError(NO_TIME_DIM_ERROR.format(batch_size=list(batch_size)))
        if batch_size[-1] <= self.burn_in:
            raise ValueError(
                TOO_SHORT_ERROR.format(burn_in=self.burn_in, batch_size=list(batch_size))
            )
        time_dim = tensordict.batch_dims - 1
        td_burn_in = tensordict[..., : self.burn_in]
        td_out = tensordict[..., self.burn_in :]
        with torch.no_grad():
            for module in self.modules:
                device = next(iter(module.parameters()), None)
                if device is not None and device.device != td_burn_in.device:
                    td_burn_in = td_burn_in.to(device.device)
                td_burn_in = module(td_burn_in)
        for out_key in self.out_keys:
            path = (out_key,) if isinstance(out_key, str) else out_key
            burnt = td_burn_in.get(("next", *path), None)
            if burnt is None:
                raise KeyError(NOT_WRITTEN_ERROR.format(key=("next", *path), out_key=out_key))
            burnt = burnt.select(time_dim, -1)
            value = td_out.get(out_key, None)
            if value is None:
                shape = (*td_out.batch_size, *burnt.shape[time_dim:])
                value = torch.zeros(shape, dtype=burnt.dtype, device=tensordict.device)
            else:
                value = value.clone()  # the input's storage stays as it was
            value.select(time_dim, 0).copy_(burnt)
            td_out.set(out_key, value)
        return td_out

    def __repr__(self) -> str:
        return (
            f"BurnInTransform(burn_in={self.burn_in}, in_keys={self.in_keys}, "
            f"out_keys={self.out_keys})"
        )
