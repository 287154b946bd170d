"""Transforms that step the env themselves or read its episode structure: `FrameSkipTransform`,
`NoopResetEnv`, `EndOfLifeTransform`."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import torch
from tensordict import NestedKey, TensorDictBase, unravel_key

from rlcore import step_mdp
from rlspecs import Composite, Unbounded

from ._base import Transform, _get

__all__ = ["EndOfLifeTransform", "FrameSkipTransform", "NoopResetEnv"]

FORWARD_NOT_IMPLEMENTED = "class {} cannot be executed without a parent environment."
FRAME_SKIP_VALUE_ERROR = "frame_skip should have a value greater or equal to one, got {value!r}."
FRAME_SKIP_NO_PARENT = "parent not found for FrameSkipTransform"
FRAME_SKIP_FORWARD = "FrameSkipTransform can only be used when appended to a transformed env."
NOOPS_VALUE_ERROR = "NoopResetEnv: noops must be a non-negative integer, got {value!r}"
NOOP_NO_PARENT = "NoopResetEnv.parent not found. Make sure that the parent is set."
NOOP_BATCHED_ERROR = (
    "The parent environment batch-size is non-null (batch_size={batch_size}). NoopResetEnv is "
    "designed to work on single env instances, as partial reset is currently not supported. "
    "In case you are trying to use NoopResetEnv over a batch of environments, know that you can "
    "have a transformed batch of transformed envs, such as: `TransformedEnv(ParallelEnv(3, "
    "lambda: TransformedEnv(MyEnv(), NoopResetEnv(3))), OtherTransform())`."
)
NOOP_SCALAR_DONE_ERROR = (
    "NoopResetEnv only supports scalar done states, got {key!r} of shape {shape}"
)
NOOP_TRIALS_ERROR = (
    "Parent env was repeatedly done or truncated before the sampled number of noops (={noops}) "
    "could be applied ({trials} trials)."
)
EOL_NOT_GYM_WARNING = (
    "The base_env is not a gym env. Compatibility of {cls} is not guaranteed with environment "
    "types that do not inherit from GymWrapper."
)
EOL_LIVES_ERROR = (
    "EndOfLifeTransform: could not read the lives at {path!r} of the base env ({env}): {err}. "
    "Let the env write them instead (e.g. GymEnv(...).set_info_dict_reader("
    "default_info_dict_reader(['lives']))): an entry {key!r} in the env's outputs is read "
    "directly."
)
EOL_DONE_ERROR = (
    "The done value pointed by {key!r} cannot be found in tensordict with keys {keys}. Make sure "
    "to pass the appropriate done_key to the EndOfLifeTransform transform."
)
EOL_DONE_SPEC_ERROR = "EndOfLifeTransform: done_key {key!r} is not in the done spec (keys: {keys})"
_MAX_NOOPS_TRIALS = 10
# torchrl 0.4 warns unless the base env is a GymWrapper (rllibs' GymWrapper/GymEnv, found by
# name: rltransforms does not depend on rllibs)
_GYM_CLASS = "GymWrapper"


class FrameSkipTransform(Transform):
    """Repeats each action `frame_skip` times in the parent env, summing the rewards.

    The repetition stops early when a done flag is raised (the env is never stepped past the
    end of an episode); the outputs of the last step are returned with the summed rewards.

    Args:
        frame_skip: the number of env steps per step (>= 1).

    Examples:
        >>> from rltransforms import TransformedEnv
        >>> env = TransformedEnv(base_env, FrameSkipTransform(3))
        >>> td = env.rand_step(env.reset())
        >>> td["next", "reward"]  # three base-env steps of reward 1
        tensor([3.])
    """

    def __init__(self, frame_skip: int = 1) -> None:
        if isinstance(frame_skip, bool) or not isinstance(frame_skip, int) or frame_skip < 1:
            raise ValueError(FRAME_SKIP_VALUE_ERROR.format(value=frame_skip))
        super().__init__()
        self.frame_skip = frame_skip

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        parent = self.parent
        if parent is None:
            raise RuntimeError(FRAME_SKIP_NO_PARENT)
        reward_keys = parent.reward_keys
        done_keys = parent.done_keys
        rewards = {key: next_tensordict.get(key) for key in reward_keys}
        for _ in range(self.frame_skip - 1):
            if any(bool(next_tensordict.get(key).any()) for key in done_keys):
                break
            next_tensordict = parent._step(tensordict)
            for key in reward_keys:
                rewards[key] = rewards[key] + next_tensordict.get(key)
        for key, reward in rewards.items():
            next_tensordict.set(key, reward)
        return next_tensordict

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        raise RuntimeError(FRAME_SKIP_FORWARD)

    def __repr__(self) -> str:
        return f"FrameSkipTransform(frame_skip={self.frame_skip})"


class NoopResetEnv(Transform):
    """Runs random actions after each reset: `noops` of them, or a random number below `noops`.

    If the env is done during the no-ops it is reset and the no-ops start again (at most 10
    times, then a `RuntimeError` is raised). Only for unbatched envs (one episode at a time);
    wrap each sub-env of a batched env instead.

    Args:
        noops: the number of random steps (the upper bound when `random`).
        random: draw the number of steps in `[0, noops)` at each reset (default True).

    Examples:
        >>> from rltransforms import Compose, StepCounter, TransformedEnv
        >>> env = TransformedEnv(base_env, Compose(StepCounter(), NoopResetEnv(5, random=False)))
        >>> env.reset()["step_count"]  # the reset output comes after 5 random steps
        tensor([5])
    """

    def __init__(self, noops: int = 30, random: bool = True) -> None:
        if isinstance(noops, bool) or not isinstance(noops, int) or noops < 0:
            raise ValueError(NOOPS_VALUE_ERROR.format(value=noops))
        super().__init__()
        self.noops = noops
        self.random = random

    @property
    def base_env(self) -> Any:
        """The env the no-ops run in (the parent env)."""
        return self.parent

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        parent = self.parent
        if parent is None:
            raise RuntimeError(NOOP_NO_PARENT)
        if parent.batch_size.numel() > 1:
            raise ValueError(NOOP_BATCHED_ERROR.format(batch_size=tuple(parent.batch_size)))
        noops = self.noops
        if self.random:
            noops = int(torch.randint(noops, (1,)).item()) if noops > 0 else 0
        done_keys = parent.done_keys
        data = parent._reset_proc_data(tensordict.clone(False), tensordict_reset)
        for _ in range(_MAX_NOOPS_TRIALS + 1):
            for _ in range(noops):
                data = parent.rand_step(data)
                done = False
                for key in done_keys:
                    flag = data.get(("next", *((key,) if isinstance(key, str) else key)))
                    if flag.numel() > 1:
                        raise ValueError(
                            NOOP_SCALAR_DONE_ERROR.format(key=key, shape=tuple(flag.shape))
                        )
                    done = done or bool(flag)
                data = step_mdp(
                    data,
                    exclude_done=False,
                    reward_keys=parent.reward_keys,
                    done_keys=done_keys,
                    action_keys=parent.action_keys,
                )
                if done:
                    data = parent.reset(data.clone(False))
                    break
            else:
                break
        else:
            raise RuntimeError(NOOP_TRIALS_ERROR.format(noops=noops, trials=_MAX_NOOPS_TRIALS + 1))
        return data.exclude(*parent.reward_keys)

    def __repr__(self) -> str:
        return f"NoopResetEnv(noops={self.noops}, random={self.random})"


def _resolve(obj: Any, path: Sequence[str]) -> Any:
    """`obj.a.b.c` for `path = ["a", "b", "c"]`, mapped over lists (one value per sub-env).

    An env wrapper that lacks an attribute is looked through: its library env (`_env`) is read.
    """
    if isinstance(obj, list):
        return [_resolve(item, path) for item in obj]
    if not path:
        return obj
    name, rest = path[0], path[1:]
    try:
        value = getattr(obj, name)
    except AttributeError:
        inner = getattr(obj, "__dict__", {}).get("_env")
        if inner is None:
            raise
        value = getattr(inner, name)
    return _resolve(value, rest)


def _as_lives(value: Any) -> torch.Tensor:
    if callable(value):
        value = value()
    elif isinstance(value, list):
        value = [item() if callable(item) else item for item in value]
    return torch.as_tensor(value, dtype=torch.int64)


class EndOfLifeTransform(Transform):
    """Writes an end-of-life flag: True when the agent lost a life at this step (or is done).

    Atari games have several lives per episode; value estimation improves when losing a life
    ends the bootstrapped return (DQN), without resetting the env. The flag is an observation,
    not a done flag, so the env does not reset on it: a loss reads it as its done signal
    (`register_keys(loss)`).

    The lives are read from the env's outputs when the env writes `lives_key` itself (e.g. a
    Gymnasium ALE env with an info dict reader of `"lives"`: this works through batched envs);
    otherwise from the base env's attribute `eol_attribute` (`unwrapped.ale.lives`, looked up
    on the Gymnasium env a wrapper holds), and then written at `lives_key`. As in torchrl 0.4,
    each step and reset warns (UserWarning) when the base env is not a `GymWrapper` (a
    `GymEnv`): a batched env of Gym envs, a DMControl env or any other env.

    Args:
        eol_key: where the end-of-life flag is written (default `"end-of-life"`).
        lives_key: where the lives are read or written (default `"lives"`).
        done_key: the done flag whose shape the end-of-life flag takes and which it includes.
        eol_attribute: the dotted path of the lives on the base env (called if callable).

    Examples:
        >>> from rltransforms import TransformedEnv
        >>> import warnings
        >>> base_env.lives = lambda: 3  # an Atari env would expose unwrapped.ale.lives
        >>> env = TransformedEnv(base_env, EndOfLifeTransform(eol_attribute="lives"))
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")  # base_env is no Gym env: a warning says so
        ...     td = env.rand_step(env.reset())
        >>> td["next", "end-of-life"], td["next", "lives"]
        (tensor([False]), tensor(3))
    """

    NO_PARENT_ERR = (
        "The {} transform is being executed without a parent env. This is currently not supported."
    )

    def __init__(
        self,
        eol_key: NestedKey = "end-of-life",
        lives_key: NestedKey = "lives",
        done_key: NestedKey = "done",
        eol_attribute: str = "unwrapped.ale.lives",
    ) -> None:
        super().__init__(in_keys=[done_key], out_keys=[eol_key, lives_key])
        self.eol_key = unravel_key(eol_key)
        self.lives_key = unravel_key(lives_key)
        self.done_key = unravel_key(done_key)
        self.eol_attribute = eol_attribute.split(".")
        self._lives_in_data = False

    def _parent_or_raise(self) -> Any:
        parent = self.parent
        if parent is None:
            raise RuntimeError(self.NO_PARENT_ERR.format(type(self)))
        return parent

    def _warn_if_not_gym(self, parent: Any) -> None:
        """torchrl 0.4's warning, at every step and reset whose base env is not a GymWrapper
        (also when the lives are read from the env's outputs, e.g. through a batched env)."""
        if not any(cls.__name__ == _GYM_CLASS for cls in type(parent.base_env).__mro__):
            warnings.warn(
                EOL_NOT_GYM_WARNING.format(cls=type(self)), category=UserWarning, stacklevel=4
            )

    def _get_lives(self) -> torch.Tensor:
        parent = self._parent_or_raise()
        base_env = parent.base_env
        try:
            lives = _resolve(base_env, self.eol_attribute)
        except Exception as err:  # noqa: BLE001  (re-raised with the remedy)
            raise RuntimeError(
                EOL_LIVES_ERROR.format(
                    path=".".join(self.eol_attribute),
                    env=type(base_env).__name__,
                    err=err,
                    key=self.lives_key,
                )
            ) from err
        return _as_lives(lives).to(parent.device)

    def _call(self, tensordict: TensorDictBase) -> TensorDictBase:
        return tensordict

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        self._warn_if_not_gym(self._parent_or_raise())
        done = _get(next_tensordict, self.done_key)
        if done is None:
            raise KeyError(
                EOL_DONE_ERROR.format(
                    key=self.done_key, keys=sorted(map(str, next_tensordict.keys(True, True)))
                )
            )
        if self._lives_in_data:
            lives = next_tensordict.get(self.lives_key)
        else:
            lives = self._get_lives()
        previous = tensordict.get(self.lives_key, None)
        if previous is None:
            lost = torch.zeros_like(done)
        else:
            lost = (previous > lives.to(previous.device)).to(done.device)
            lost = lost.reshape(done.shape) if lost.numel() == done.numel() else lost
            lost = lost.reshape(*lost.shape, *(1,) * (done.ndim - lost.ndim)).expand_as(done)
        next_tensordict.set(self.eol_key, lost | done)
        if not self._lives_in_data:
            next_tensordict.set(self.lives_key, lives.reshape(next_tensordict.batch_size))
        return next_tensordict

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        parent = self._parent_or_raise()
        self._warn_if_not_gym(parent)
        done_shape = parent.full_done_spec[self.done_key].shape
        tensordict_reset.set(
            self.eol_key,
            torch.zeros(done_shape, dtype=torch.bool, device=tensordict_reset.device),
        )
        if not self._lives_in_data:
            lives = self._get_lives()
            tensordict_reset.set(self.lives_key, lives.reshape(tensordict_reset.batch_size))
        return tensordict_reset

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        observation_spec = output_spec["full_observation_spec"]
        done_spec = output_spec["full_done_spec"]
        if self.done_key not in set(done_spec.keys(True, True)):
            raise KeyError(
                EOL_DONE_SPEC_ERROR.format(
                    key=self.done_key, keys=sorted(map(str, done_spec.keys(True, True)))
                )
            )
        self._lives_in_data = self.lives_key in set(observation_spec.keys(True, True))
        observation_spec[self.eol_key] = done_spec[self.done_key].clone()
        if not self._lives_in_data:
            observation_spec[self.lives_key] = Unbounded(
                shape=output_spec.shape, dtype=torch.int64, device=observation_spec.device
            )
        return super().transform_output_spec(output_spec)

    def register_keys(self, loss_or_advantage: Any) -> None:
        """Tell a loss or value estimator to read the end-of-life flag as its done/terminated."""
        loss_or_advantage.set_keys(done=self.eol_key, terminated=self.eol_key)

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        raise RuntimeError(FORWARD_NOT_IMPLEMENTED.format(type(self)))

    def __repr__(self) -> str:
        return (
            f"EndOfLifeTransform(eol_key={self.eol_key!r}, lives_key={self.lives_key!r}, "
            f"done_key={self.done_key!r})"
        )
