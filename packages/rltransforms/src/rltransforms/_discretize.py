"""`ActionDiscretizer`: a discrete action space over an env with a bounded continuous one."""

from __future__ import annotations

from enum import IntEnum
from typing import Any

import torch
from tensordict import NestedKey, TensorDictBase, unravel_key

from rlspecs import Bounded, Categorical, Composite, MultiCategorical, MultiOneHot, OneHot

from ._base import Transform, _get

__all__ = ["ActionDiscretizer"]

NOT_BOUNDED_ERROR = (
    "action spec type {type} is not supported. The action spec type must be Bounded "
    "(ActionDiscretizer, key {key!r})."
)
NO_ACTION_SPEC_ERROR = (
    "ActionDiscretizer: the env has no action {key!r} to discretize (action keys: {keys})"
)
NUM_INTERVALS_SHAPE_ERROR = "Cannot use num_intervals with shape {shape}"
NUM_INTERVALS_LEN_ERROR = (
    "ActionDiscretizer: num_intervals has {got} entries but the action {key!r} has {expected} "
    "(its last dim); pass one count per action entry or a single int"
)
NOT_INITIALIZED_ERROR = (
    "Cannot execute transform ActionDiscretizer without a parent env: its intervals are built "
    "from the env's action spec (put it in a TransformedEnv first)."
)
MISSING_ACTION_ERROR = "ActionDiscretizer: the discrete action {key!r} is missing (keys: {keys})"


class ActionDiscretizer(Transform):
    """Exposes a bounded continuous action as a discrete one (for DQN-like algorithms).

    Each entry of the action (the last dim of the env's `Bounded` action spec) is split into
    `num_intervals` intervals; the policy picks one per entry (a `MultiCategorical` action, or
    `MultiOneHot` with `categorical=False`; `Categorical` / `OneHot` for a scalar action) and
    the env receives the value chosen in that interval by `sampling` (its middle by default,
    its low or high end, or a uniform draw in it). Override `custom_arange` for other spacings.

    When `out_action_key` differs from `action_key`, the continuous action leaves the action
    spec for the state spec and is recorded at the root of each step next to the discrete one.

    Args:
        num_intervals: intervals per action entry: an int for all, or one per entry.
        action_key: the env's (continuous) action (default `"action"`).
        out_action_key: where the policy writes the discrete action (default `action_key`).
        sampling: an `ActionDiscretizer.SamplingStrategy` (default `MEDIAN`).
        categorical: labels (True, default) or one-hot encodings (False).

    Examples:
        >>> import torch
        >>> from rlmocks import ContinuousActionVecMockEnv
        >>> from rlspecs import Bounded
        >>> from rltransforms import TransformedEnv
        >>> base = ContinuousActionVecMockEnv(action_spec=Bounded(-1.0, 1.0, (2,)))
        >>> env = TransformedEnv(base, ActionDiscretizer(num_intervals=4))
        >>> type(env.action_spec).__name__, env.action_spec.nvec.tolist()
        ('MultiCategorical', [4, 4])
        >>> env.transform.intervals[0]
        tensor([-0.7500, -0.2500,  0.2500,  0.7500])
    """

    class SamplingStrategy(IntEnum):
        """Where in its interval a discrete action lands."""

        MEDIAN = 0
        LOW = 1
        HIGH = 2
        RANDOM = 3

    def __init__(
        self,
        num_intervals: int | torch.Tensor,
        action_key: NestedKey = "action",
        out_action_key: NestedKey | None = None,
        sampling: ActionDiscretizer.SamplingStrategy | int | None = None,
        categorical: bool = True,
    ) -> None:
        if out_action_key is None:
            out_action_key = action_key
        super().__init__(in_keys_inv=[action_key], out_keys_inv=[out_action_key])
        self.action_key = unravel_key(action_key)
        self.out_action_key = unravel_key(out_action_key)
        if isinstance(num_intervals, torch.Tensor):
            if num_intervals.ndim > 1:
                raise RuntimeError(NUM_INTERVALS_SHAPE_ERROR.format(shape=num_intervals.shape))
            self.register_buffer("num_intervals", num_intervals)
        else:
            self.num_intervals = num_intervals
        self.sampling = self.SamplingStrategy.MEDIAN if sampling is None else sampling
        self.categorical = categorical
        self.intervals: list[torch.Tensor] | None = None
        self.dtype = torch.get_default_dtype()

    def custom_arange(self, nint: int, device: torch.device | None) -> torch.Tensor:
        """The positions of the `nint` discrete actions in [0, 1) (times the range, plus low).

        Examples:
            >>> t = ActionDiscretizer(4)
            >>> t.custom_arange(4, None)
            tensor([0.1250, 0.3750, 0.6250, 0.8750])
        """
        low_ends = torch.arange(nint, dtype=self.dtype, device=device) / nint
        high_ends = (1 - low_ends).flip(0)
        if self.sampling == self.SamplingStrategy.MEDIAN:
            return (low_ends + high_ends) / 2
        if self.sampling == self.SamplingStrategy.HIGH:
            return high_ends
        return low_ends  # LOW, and RANDOM's starting points (a jitter is added)

    # ------------------------------------------------------------------ specs
    def transform_input_spec(self, input_spec: Composite) -> Composite:
        actions = input_spec["full_action_spec"]
        keys = [unravel_key(k) for k in actions.keys(True, True)]
        if self.action_key not in keys:
            raise KeyError(NO_ACTION_SPEC_ERROR.format(key=self.action_key, keys=keys))
        batch_size = input_spec.shape
        action_spec = actions[self.action_key]
        if not isinstance(action_spec, Bounded):
            raise TypeError(NOT_BOUNDED_ERROR.format(type=type(action_spec), key=self.action_key))
        action_spec = action_spec[(0,) * len(batch_size)] if batch_size else action_spec
        scalar = not action_spec.shape
        self.dtype = action_spec.dtype
        low, high = action_spec.space.low, action_spec.space.high
        if scalar:
            low, high = low.reshape(1), high.reshape(1)
        elif action_spec.ndim > 1:
            # entries of the leading dims share the bounds of the first one (torchrl builds the
            # intervals along the last dim only)
            low, high = low.reshape(-1, low.shape[-1])[0], high.reshape(-1, high.shape[-1])[0]
        nvec = self._nvec(low.numel(), action_spec.device)
        self.intervals = [
            lo + self.custom_arange(int(n), action_spec.device) * (hi - lo)
            for lo, hi, n in zip(low, high, nvec.tolist())
        ]
        self.jitters = (high - low) / nvec.to(high.dtype)
        self.register_buffer("nvec", nvec.squeeze(0) if scalar else nvec)
        device = action_spec.device
        if scalar:
            cls = Categorical if self.categorical else OneHot
            n = int(nvec)
            discrete = cls(n=n, shape=() if self.categorical else (n,), device=device)
        elif self.categorical:
            discrete = MultiCategorical(nvec=nvec.expand(action_spec.shape), device=device)
        else:
            shape = (*action_spec.shape[:-1], int(nvec.sum()))
            discrete = MultiOneHot(nvec=nvec.tolist(), shape=shape, device=device)
        if batch_size:
            discrete = discrete.expand(*batch_size, *discrete.shape)
        continuous = actions[self.action_key]
        if self.out_action_key != self.action_key:
            del actions[self.action_key]
            input_spec["full_state_spec"][self.action_key] = continuous
        actions[self.out_action_key] = discrete
        return input_spec

    def _nvec(self, n_act: int, device: torch.device | None) -> torch.Tensor:
        nvec = torch.as_tensor(self.num_intervals, device=device).to(torch.int64).reshape(-1)
        if nvec.numel() == 1:
            return nvec.expand(n_act).clone()
        if nvec.numel() != n_act:
            raise ValueError(
                NUM_INTERVALS_LEN_ERROR.format(
                    got=nvec.numel(), key=self.action_key, expected=n_act
                )
            )
        return nvec

    # ------------------------------------------------------------------ data path
    def _continuous(self, action: torch.Tensor) -> torch.Tensor:
        """The env action for a discrete one (labels, or one-hot blocks)."""
        intervals = self.intervals
        device = action.device
        scalar = self.nvec.ndim == 0
        if not self.categorical:
            sizes = [int(self.nvec)] if scalar else self.nvec.tolist()
            blocks = action.split(sizes, dim=-1)
            labels = [block.to(torch.int64).argmax(-1) for block in blocks]
        elif scalar:
            labels = [action]
        else:
            if self.nvec.shape == (1,) and action.shape[-1:] != (1,):
                # a MultiCategorical of shape (1,) samples without its trailing dim (torchrl 0.4)
                action = action.unsqueeze(-1)
            labels = list(action.unbind(-1))
        values = [iv.to(device)[label.to(torch.int64)] for iv, label in zip(intervals, labels)]
        result = values[0] if scalar else torch.stack(values, -1)
        if self.sampling == self.SamplingStrategy.RANDOM:
            jitters = self.jitters.to(device)
            jitters = jitters.squeeze(0) if scalar else jitters
            result = result + jitters * torch.rand_like(result)
        return result

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        if self.intervals is None:
            self._init()
        action = _get(tensordict, self.out_action_key)
        if action is None:
            if self.missing_tolerance:
                return tensordict
            raise KeyError(
                MISSING_ACTION_ERROR.format(
                    key=self.out_action_key, keys=sorted(map(str, tensordict.keys(True)))
                )
            )
        continuous = self._continuous(action)
        if self.out_action_key != self.action_key:
            self.__dict__["_last_continuous"] = continuous  # recorded by `_step`
        tensordict.set(self.action_key, continuous)
        return tensordict

    def _init(self) -> None:
        """Build the intervals from the env's action spec (they come with the env's specs)."""
        container = self.container
        if container is not None:
            container.input_spec  # noqa: B018  (building the specs builds the intervals)
        if self.intervals is None:
            raise RuntimeError(NOT_INITIALIZED_ERROR)

    def inv(self, tensordict: TensorDictBase) -> TensorDictBase:
        """The env action for the discrete one in `tensordict` (in place when the keys differ)."""
        if self.out_action_key == self.action_key:
            return super().inv(tensordict)
        return self._inv_call(tensordict)

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        continuous = self.__dict__.pop("_last_continuous", None)
        if continuous is not None:
            # torchrl records the continuous action the base env received at the root of the
            # step, beside the discrete one (it is a state entry of this env)
            tensordict.set(self.action_key, continuous)
        return next_tensordict

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(num_intervals={self.num_intervals}, "
            f"action_key={self.action_key}, out_action_key={self.out_action_key}, "
            f"sampling={int(self.sampling)}, categorical={self.categorical})"
        )

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state.pop("_last_continuous", None)
        return state
