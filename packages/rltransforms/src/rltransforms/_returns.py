"""Return transforms: `TargetReturn` (a return-to-achieve carried by the env) and
`Reward2GoTransform` (discounted reward-to-go of stored episodes)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from tensordict import NestedKey, TensorDictBase

from rlspecs import Composite, Unbounded

from ._base import Transform, _get
from ._resets import ResetKeyMixin, expand_right, get_reset

__all__ = ["Reward2GoTransform", "TargetReturn"]

FORWARD_NOT_IMPLEMENTED = "class {} cannot be executed without a parent environment."
MODE_ERROR = "Mode can only be 'reduce' or 'constant', got {mode!r}."
DUPLICATE_OUT_KEYS_ERROR = (
    "Could not infer the target_return because multiple rewards are located at the same "
    "level: {keys}; pass out_keys="
)
TARGET_SHAPE_ERROR = (
    "The shape of the reward ({reward}) and target return ({target}) must match (key {key!r})."
)
TARGET_MISSING_ERROR = (
    "TargetReturn: {key!r} not found in the step input; reset the env first (the target "
    "return is carried from reset)"
)
REWARD_SPEC_ERROR = "TargetReturn: in_key {key!r} is not in the env's output spec (keys: {keys})"
NO_EPISODE_END_ERROR = (
    "No episode ends found to calculate the reward to go. Make sure that the number of "
    "frames_per_batch is larger than number of steps per episode ({key!r} is never True in "
    "some trajectory)."
)
R2G_NO_KEY_ERROR = "Reward2GoTransform: could not find any of the input keys {keys} (keys: {have})"
R2G_SHAPE_ERROR = "Reward2GoTransform: reward {key!r} has shape {reward} but done has {done}"


def _replace_last(key: NestedKey, new: str) -> NestedKey:
    return (*key[:-1], new) if isinstance(key, tuple) else new


class TargetReturn(ResetKeyMixin, Transform):
    """Writes a target return next to each reward: set at reset, carried and updated each step.

    With `mode="reduce"` the reward of each step is subtracted from the target; with
    `mode="constant"` it stays as set. The target is an observation (and a state, so that
    `step_mdp` carries it to the next step's input).

    Args:
        target_return: the return to achieve, written at reset.
        mode: `"reduce"` (default) or `"constant"`.
        in_keys: the rewards (default: the parent env's reward keys; `["reward"]` without env).
        out_keys: the targets (default: each in_key with its last name `"target_return"`).
        reset_key: the reset entry to follow (default: the parent env's only reset key).

    Examples:
        >>> from rltransforms import TransformedEnv
        >>> env = TransformedEnv(base_env, TargetReturn(10.0, mode="reduce"))
        >>> env.rollout(3)["next", "target_return"].squeeze(-1)  # the reward is 1 per step
        tensor([9., 8., 7.])
    """

    MODES = ["reduce", "constant"]
    MODE_ERR = "Mode can only be 'reduce' or 'constant'."

    def __init__(
        self,
        target_return: float,
        mode: str = "reduce",
        in_keys: Sequence[NestedKey] | NestedKey | None = None,
        out_keys: Sequence[NestedKey] | NestedKey | None = None,
        reset_key: NestedKey | None = None,
    ) -> None:
        if mode not in self.MODES:
            raise ValueError(MODE_ERROR.format(mode=mode))
        super().__init__(in_keys=in_keys, out_keys=out_keys)
        self.target_return = target_return
        self.mode = mode
        self.reset_key = reset_key
        self._target_specs: dict[NestedKey, Unbounded] = {}

    @property
    def in_keys(self) -> list[NestedKey]:
        in_keys = self.__dict__.get("_in_keys")
        if in_keys is not None:
            return in_keys
        parent = self.parent
        return list(parent.reward_keys) if parent is not None else ["reward"]

    @in_keys.setter
    def in_keys(self, value: Sequence[NestedKey] | NestedKey | None) -> None:
        Transform.in_keys.fset(self, value)

    @property
    def out_keys(self) -> list[NestedKey]:
        out_keys = self.__dict__.get("_out_keys")
        if out_keys is not None:
            return out_keys
        out_keys = [_replace_last(key, "target_return") for key in self.in_keys]
        if len(set(out_keys)) < len(out_keys):
            raise ValueError(DUPLICATE_OUT_KEYS_ERROR.format(keys=out_keys))
        return out_keys

    @out_keys.setter
    def out_keys(self, value: Sequence[NestedKey] | NestedKey | None) -> None:
        Transform.out_keys.fset(self, value)

    # ------------------------------------------------------------------ data path
    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        reset = get_reset(self.reset_key, tensordict)
        for out_key in self.out_keys:
            previous = tensordict.get(out_key, None)
            spec = self._target_specs.get(out_key)
            if previous is None:
                if spec is not None:
                    shape, dtype = spec.shape, spec.dtype
                else:
                    shape, dtype = (*tensordict.batch_size, 1), torch.get_default_dtype()
                target = torch.full(
                    shape, self.target_return, dtype=dtype, device=tensordict_reset.device
                )
            else:
                mask = expand_right(reset.to(previous.device), previous)
                target = torch.where(mask, self.target_return, previous)
            tensordict_reset.set(out_key, target)
        return tensordict_reset

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        for out_key in self.out_keys:
            target = _get(tensordict, out_key)
            if target is None:
                raise KeyError(TARGET_MISSING_ERROR.format(key=out_key))
            next_tensordict.set(out_key, target)
        return self._call(next_tensordict)

    def _call(self, tensordict: TensorDictBase) -> TensorDictBase:
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            reward = _get(tensordict, in_key)
            if reward is None:
                self._missing(in_key, tensordict)
                continue
            target = _get(tensordict, out_key)
            if target is None:
                raise KeyError(TARGET_MISSING_ERROR.format(key=out_key))
            tensordict.set(out_key, self._apply_target(in_key, reward, target))
        return tensordict

    def _apply_target(
        self, key: NestedKey, reward: torch.Tensor, target: torch.Tensor
    ) -> torch.Tensor:
        if target.shape != reward.shape:
            raise ValueError(
                TARGET_SHAPE_ERROR.format(reward=reward.shape, target=target.shape, key=key)
            )
        if self.mode == "reduce":
            return target - reward
        return target

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        raise NotImplementedError(FORWARD_NOT_IMPLEMENTED.format(type(self).__name__))

    # ------------------------------------------------------------------ specs
    def transform_output_spec(self, output_spec: Composite) -> Composite:
        observation_spec = output_spec["full_observation_spec"]
        known: dict[NestedKey, Any] = {}
        for group in ("full_observation_spec", "full_reward_spec", "full_done_spec"):
            if group in output_spec.keys():
                for key in output_spec[group].keys(True, True):
                    known[key] = output_spec[group][key]
        self._target_specs = {}
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            if in_key not in known:
                raise KeyError(REWARD_SPEC_ERROR.format(key=in_key, keys=sorted(map(str, known))))
            reward = known[in_key]
            spec = Unbounded(shape=reward.shape, dtype=reward.dtype, device=reward.device)
            self._target_specs[out_key] = spec
            observation_spec[out_key] = spec.clone()
        return super().transform_output_spec(output_spec)

    def transform_input_spec(self, input_spec: Composite) -> Composite:
        if not self._target_specs:
            parent = self.parent
            if parent is not None:
                self.transform_output_spec(parent.output_spec.clone())
        state_spec = input_spec["full_state_spec"]
        for out_key, spec in self._target_specs.items():
            state_spec[out_key] = spec.clone()
        return super().transform_input_spec(input_spec)

    def __repr__(self) -> str:
        return f"TargetReturn(target_return={self.target_return}, mode={self.mode!r})"


class Reward2GoTransform(Transform):
    """Discounted reward-to-go of stored episodes: `r2g[t] = r[t] + gamma * r2g[t+1]`.

    The sum restarts after each `("next", done_key)` flag; the steps after a trajectory's last
    flag (an episode cut by the end of the data) sum up to the last step, as in torchrl 0.4.
    Every trajectory needs at least one flag (else RuntimeError, as in torchrl 0.4). It is an
    inverse transform: it runs in `inv` (or `_inv_call`) on stored data, e.g. a collected batch
    before it is stored; `forward` returns its input. The time dim is the tensordict's dim named
    `"time"`; without that name it is the dim -2 of the done flag, as in torchrl 0.4 (`[..., T,
    1]`, whatever the tensordict's batch size: `[B, T]`, `[B]` or none), or the last batch dim
    for a flag without that trailing dim. It cannot be appended to an env (the reward-to-go
    needs the episode's future).

    Args:
        gamma: the discount factor (default 1.0).
        in_keys: the rewards (default `[("next", "reward")]`).
        out_keys: where to write the rewards-to-go (default: `in_keys`).
        done_key: the done flag under `"next"` ending episodes (default `"done"`).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(
        ...     {"next": {"reward": torch.ones(4, 1),
        ...               "done": torch.tensor([[False], [True], [False], [True]])}},
        ...     batch_size=[4])
        >>> Reward2GoTransform(gamma=0.5, out_keys=["r2g"]).inv(td)["r2g"].squeeze(-1)
        tensor([1.5000, 1.0000, 1.5000, 1.0000])
    """

    ENV_ERR = (
        "The Reward2GoTransform is only an inverse transform and can only be applied to the "
        "replay buffer."
    )

    def __init__(
        self,
        gamma: float | torch.Tensor = 1.0,
        in_keys: Sequence[NestedKey] | NestedKey | None = None,
        out_keys: Sequence[NestedKey] | NestedKey | None = None,
        done_key: NestedKey = "done",
    ) -> None:
        if in_keys is None:
            in_keys = [("next", "reward")]
        if out_keys is None:
            out_keys = in_keys
        super().__init__(in_keys=in_keys, in_keys_inv=in_keys, out_keys_inv=out_keys)
        self.done_key = done_key
        self.register_buffer("gamma", torch.as_tensor(gamma, dtype=torch.get_default_dtype()))

    @property
    def has_inverse(self) -> bool:
        return True

    def set_container(self, container: Any) -> None:
        from rlcore import EnvBase

        if isinstance(container, EnvBase) or (
            container is not None and container.parent is not None
        ):
            raise ValueError(self.ENV_ERR)
        super().set_container(container)

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Identity: the reward-to-go is computed by `inv`."""
        return tensordict

    def _call(self, tensordict: TensorDictBase) -> TensorDictBase:
        raise ValueError(self.ENV_ERR)

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        if self.parent is not None:
            raise ValueError(self.ENV_ERR)
        done_key = (
            "next",
            *((self.done_key,) if isinstance(self.done_key, str) else self.done_key),
        )
        done = tensordict.get(done_key, None)
        if done is None:
            raise KeyError(f"Reward2GoTransform: done flag {done_key!r} not found")
        time_dim = self._time_dim(tensordict, done)
        if not done.any(time_dim).all():
            raise RuntimeError(NO_EPISODE_END_ERROR.format(key=done_key))
        found = False
        # read at in_keys_inv, written at out_keys_inv (torchrl's naming for this transform)
        for in_key, out_key in zip(self.in_keys_inv, self.out_keys_inv):
            reward = tensordict.get(in_key, None)
            if reward is None:
                continue
            found = True
            tensordict.set(out_key, self._reward2go(in_key, reward, done, time_dim))
        if not found:
            raise KeyError(
                R2G_NO_KEY_ERROR.format(
                    keys=self.in_keys_inv, have=sorted(map(str, tensordict.keys(True)))
                )
            )
        return tensordict

    @staticmethod
    def _time_dim(tensordict: TensorDictBase, done: torch.Tensor) -> int:
        """The time dim: the tensordict's dim named `"time"` if any, else the dim -2 of `done`
        as torchrl 0.4 reads it (`done` is `[..., T, 1]`, whatever the tensordict's batch size:
        `[B, T]`, `[B]` or none); a done without that trailing dim (exactly the tensordict's
        batch shape) takes the tensordict's last batch dim."""
        batch_dims = tensordict.batch_dims
        if batch_dims and "time" in tensordict.names:
            return tensordict.names.index("time")
        if done.ndim > batch_dims or batch_dims == 0:
            return max(done.ndim - 2, 0)
        return batch_dims - 1

    def _reward2go(
        self, key: NestedKey, reward: torch.Tensor, done: torch.Tensor, time_dim: int
    ) -> torch.Tensor:
        if done.shape != reward.shape:
            done = done.reshape(*done.shape, *(1,) * (reward.ndim - done.ndim))
            try:
                done = done.expand_as(reward)
            except RuntimeError as err:
                raise ValueError(
                    R2G_SHAPE_ERROR.format(key=key, reward=reward.shape, done=done.shape)
                ) from err
        gamma = self.gamma.to(device=reward.device, dtype=reward.dtype)
        rewards = reward.unbind(time_dim)
        dones = done.unbind(time_dim)
        out = [None] * len(rewards)
        acc = torch.zeros_like(rewards[-1])
        for t in range(len(rewards) - 1, -1, -1):
            acc = rewards[t] + gamma * torch.where(dones[t], 0, acc)
            out[t] = acc
        return torch.stack(out, time_dim)

    def __repr__(self) -> str:
        return (
            f"Reward2GoTransform(gamma={float(self.gamma)}, in_keys={self.in_keys_inv}, "
            f"out_keys={self.out_keys_inv})"
        )
