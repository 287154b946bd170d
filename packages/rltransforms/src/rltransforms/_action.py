"""Action transforms: `DiscreteActionProjection` (a smaller discrete action space behind a larger
one) and `ActionMask` (the action spec follows a mask the env outputs)."""

from __future__ import annotations

import torch
from tensordict import NestedKey, TensorDictBase
from torch import nn

from rlspecs import Categorical, Composite, MultiCategorical, MultiOneHot, OneHot, TensorSpec

from ._base import Transform, _get

__all__ = ["ActionMask", "DiscreteActionProjection"]

PROJECTION_SIZE_ERROR = (
    "The `max_actions` int must be greater or equal to `num_actions_effective` "
    "(got max_actions={max_actions}, num_actions_effective={num_actions_effective})."
)
PROJECTION_SHAPE_ERROR = (
    "DiscreteActionProjection: action.shape[-1]={got} must match self.max_actions={expected} "
    "(the one-hot action the policy sends)."
)
PROJECTION_KEY_ERROR = (
    "DiscreteActionProjection: {key!r} not found in the action spec (keys: {keys})"
)
PROJECTION_ENV_SIZE_ERROR = (
    "DiscreteActionProjection: the base env's action {key!r} has {got} entries (spec shape "
    "{shape}) but num_actions_effective={expected}; num_actions_effective is the base env's "
    "number of actions, max_actions the policy's"
)

# torchrl 0.4's texts (the classes and types formatted as it formats them); the spec error
# also names the action key
MASK_FORWARD_ERROR = "class {cls} cannot be executed without a parent environment."
MASK_NO_PARENT_ERROR = (
    "{cls}.parent cannot be None: make sure this transform is executed within an environment."
)
MASK_SPEC_TYPE_ERROR = (
    "The action spec must be one of {accepted}. Got {type} instead (key {key!r})."
)
MASK_KEY_TYPE_ERROR = "The {arg} must be a nested key. Got {type} instead."


class DiscreteActionProjection(Transform):
    """Lets a policy with `max_actions` one-hot actions drive an env with `num_actions_effective`.

    Before the base env steps, an action index at or above `num_actions_effective` is replaced by
    a random valid one, and the one-hot action is cut to `num_actions_effective` entries; the
    action spec the outside sees is a `OneHot(max_actions)`. Called on a tensordict (a replay
    buffer sample, `include_forward=True`), the map goes the other way: an env action is widened
    to `max_actions` entries.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = DiscreteActionProjection(num_actions_effective=2, max_actions=3)
        >>> t.inv(TensorDict(action=torch.tensor([0, 1, 0])))["action"]
        tensor([0, 1])
    """

    def __init__(
        self,
        num_actions_effective: int,
        max_actions: int,
        action_key: NestedKey = "action",
        include_forward: bool = True,
    ) -> None:
        if max_actions < num_actions_effective:
            raise RuntimeError(
                PROJECTION_SIZE_ERROR.format(
                    max_actions=max_actions, num_actions_effective=num_actions_effective
                )
            )
        super().__init__(in_keys=[action_key] if include_forward else [], in_keys_inv=[action_key])
        self.num_actions_effective = num_actions_effective
        self.max_actions = max_actions

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        # env outputs hold no action to widen: the caller's action is left as sent
        return next_tensordict

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Widen the env actions at in_keys to `max_actions` one-hot entries (stored data)."""
        return super()._call(tensordict)

    def _apply_transform(self, action: torch.Tensor) -> torch.Tensor:
        index = action.long().argmax(-1)
        return nn.functional.one_hot(index, self.max_actions).to(action.dtype)

    def _inv_apply_transform(self, action: torch.Tensor) -> torch.Tensor:
        if action.shape[-1] != self.max_actions:
            raise RuntimeError(
                PROJECTION_SHAPE_ERROR.format(got=action.shape[-1], expected=self.max_actions)
            )
        index = action.long().argmax(-1)
        invalid = index >= self.num_actions_effective
        if invalid.any():
            index = index.masked_scatter(
                invalid,
                torch.randint(
                    self.num_actions_effective, (int(invalid.sum()),), device=index.device
                ),
            )
        return nn.functional.one_hot(index, self.num_actions_effective).to(action.dtype)

    def _wide_spec(self, spec: TensorSpec, key: NestedKey | None = None) -> OneHot:
        if spec.shape and spec.shape[-1] != self.num_actions_effective:
            raise ValueError(
                PROJECTION_ENV_SIZE_ERROR.format(
                    key=self.in_keys_inv[0] if key is None else key,
                    got=spec.shape[-1],
                    shape=tuple(spec.shape),
                    expected=self.num_actions_effective,
                )
            )
        return OneHot(
            self.max_actions,
            shape=(*spec.shape[:-1], self.max_actions),
            dtype=spec.dtype,
            device=spec.device,
        )

    def transform_input_spec(self, input_spec: TensorSpec) -> TensorSpec:
        if not isinstance(input_spec, Composite):
            return self._wide_spec(input_spec)
        action_spec = input_spec["full_action_spec"]
        key = self.in_keys_inv[0]
        if key not in action_spec.keys(True, True):
            keys = list(action_spec.keys(True, True))
            raise KeyError(PROJECTION_KEY_ERROR.format(key=key, keys=keys))
        action_spec[key] = self._wide_spec(action_spec[key], key)
        return input_spec

    def __repr__(self) -> str:
        return (
            f"DiscreteActionProjection(num_actions_effective={self.num_actions_effective}, "
            f"max_actions={self.max_actions}, in_keys_inv={self.in_keys_inv})"
        )


class ActionMask(Transform):
    """Keeps the action spec's mask in step with a mask the env outputs.

    After each reset and step, the boolean `mask_key` entry (True: the action is allowed) is
    written into the mask of the env's `action_key` spec (`OneHot`, `Categorical`, `MultiOneHot`
    or `MultiCategorical`), so that `env.rand_action()` and random rollouts only take allowed
    actions. It needs an env: called on a tensordict it raises.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from rlcore import EnvBase
        >>> from rltransforms import TransformedEnv
        >>> from rlspecs import Binary, Categorical, Composite, Unbounded
        >>> class MaskedEnv(EnvBase):  # each action may be taken once per episode
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.action_spec = Categorical(4)
        ...         self.state_spec = Composite(action_mask=Binary(4, dtype=torch.bool))
        ...         self.observation_spec = Composite(
        ...             obs=Unbounded(3), action_mask=Binary(4, dtype=torch.bool))
        ...         self.reward_spec = Unbounded(1)
        ...     def _reset(self, td):
        ...         return TensorDict(obs=torch.zeros(3), action_mask=torch.ones(4, dtype=torch.bool))
        ...     def _step(self, td):
        ...         mask = td["action_mask"].scatter(-1, td["action"].unsqueeze(-1), False)
        ...         return TensorDict(obs=torch.zeros(3), action_mask=mask,
        ...                           reward=torch.zeros(1), done=~mask.any().view(1))
        ...     def _set_seed(self, seed):
        ...         pass
        >>> env = TransformedEnv(MaskedEnv(), ActionMask())
        >>> sorted(env.rollout(10)["action"].tolist())
        [0, 1, 2, 3]
    """

    ACCEPTED_SPECS = (OneHot, Categorical, MultiOneHot, MultiCategorical)

    def __init__(
        self, action_key: NestedKey = "action", mask_key: NestedKey = "action_mask"
    ) -> None:
        for arg, key in (("action key", action_key), ("mask key", mask_key)):
            if not isinstance(key, (str, tuple)):
                raise ValueError(MASK_KEY_TYPE_ERROR.format(arg=arg, type=type(key)))
        super().__init__(in_keys=[action_key, mask_key], out_keys=[])
        self._cached: tuple[object, TensorSpec] | None = None  # (input_spec, action leaf)

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Not available: see the class docstring."""
        raise RuntimeError(MASK_FORWARD_ERROR.format(cls=type(self)))

    def _action_spec(self) -> TensorSpec:
        """The env's action leaf, looked up again only when the env's input spec is rebuilt."""
        container = self.container
        if container is None:
            raise RuntimeError(MASK_NO_PARENT_ERROR.format(cls=type(self)))
        input_spec = container.input_spec
        cached = self._cached
        if cached is not None and cached[0] is input_spec:
            return cached[1]
        key = self.in_keys[0]
        spec = input_spec["full_action_spec"][key]
        if not isinstance(spec, self.ACCEPTED_SPECS):
            raise ValueError(
                MASK_SPEC_TYPE_ERROR.format(key=key, accepted=self.ACCEPTED_SPECS, type=type(spec))
            )
        self._cached = (input_spec, spec)
        return spec

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        spec = self._action_spec()
        mask = _get(next_tensordict, self.in_keys[1])
        if mask is None:
            self._missing(self.in_keys[1], next_tensordict)
        else:
            spec.update_mask(mask.to(spec.device))
        return next_tensordict

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        spec = self._action_spec()
        if _get(tensordict_reset, self.in_keys[1]) is None:
            spec.update_mask(None)  # a reset without mask allows every action again
            return tensordict_reset
        return self._call(tensordict_reset)

    def __repr__(self) -> str:
        return f"ActionMask(action_key={self.in_keys[0]!r}, mask_key={self.in_keys[1]!r})"
