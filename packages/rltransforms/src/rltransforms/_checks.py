"""Checks on the data an env returns: `FiniteTensorDictCheck`."""

from __future__ import annotations

import torch
from tensordict import TensorDictBase

from ._base import Transform

__all__ = ["FiniteTensorDictCheck"]

NON_FINITE_ERROR = (
    "FiniteTensorDictCheck: entry {key!r} (shape {shape}, dtype {dtype}) holds {bad} "
    "non-finite value(s) out of {numel} (nan: {nan}, inf: {inf}); expected finite values only"
)


class FiniteTensorDictCheck(Transform):
    """Raises `ValueError` when an entry of a step or reset output is not finite (nan or inf).

    Every floating-point (or complex) leaf is checked, nested entries included; integer and
    boolean leaves are finite by construction. The error names the first offending key, its
    shape and dtype and how many values are nan or inf. Outside an env, `t(td)` checks `td`
    (a batch of stored data, say) and returns it unchanged. As in torchrl 0.4 the transform takes
    no argument and leaves the specs as they are.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> check = FiniteTensorDictCheck()
        >>> check(TensorDict(obs=torch.zeros(2)))["obs"]
        tensor([0., 0.])
        >>> check(TensorDict(obs=torch.tensor([0.0, float("nan")])))
        Traceback (most recent call last):
        ...
        ValueError: FiniteTensorDictCheck: entry 'obs' (shape (2,), dtype torch.float32) holds 1 ...
    """

    def __init__(self) -> None:
        super().__init__(in_keys=[])

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        leaves = [
            (key, value)
            for key, value in next_tensordict.items(include_nested=True, leaves_only=True)
            if isinstance(value, torch.Tensor) and (value.is_floating_point() or value.is_complex())
        ]
        if not leaves:
            return next_tensordict
        # one reduction (and one host sync) for the whole tensordict; keys are looked at on failure
        finite = torch.stack([value.isfinite().all() for _, value in leaves])
        if bool(finite.all()):
            return next_tensordict
        key, value = leaves[int((~finite).nonzero()[0])]
        nan = int(value.isnan().sum())
        inf = int(value.isinf().sum())
        raise ValueError(
            NON_FINITE_ERROR.format(
                key=key,
                shape=tuple(value.shape),
                dtype=value.dtype,
                bad=int((~value.isfinite()).sum()),
                numel=value.numel(),
                nan=nan,
                inf=inf,
            )
        )

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        return self._call(tensordict_reset)

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Check `tensordict` (raises `ValueError` naming a non-finite entry) and return it."""
        return self._call(tensordict)

    def __repr__(self) -> str:
        return "FiniteTensorDictCheck()"
