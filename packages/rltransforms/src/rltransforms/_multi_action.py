"""`MultiAction`: one outer step runs a chunk of actions in the parent env, one by one."""

from __future__ import annotations

from typing import Any

import torch
from tensordict import NestedKey, TensorDictBase, unravel_key

from rlcore import StepMDP, terminated_or_truncated
from rlspecs import Composite, TensorSpec

from ._base import Transform

__all__ = ["MultiAction"]

DIM_ERROR = "MultiAction: dim must be greater than 0 (got dim={dim})."
CHUNK_SIZE_ERROR = (
    "MultiAction needs chunk_size=H (the number of actions per outer step): torchrl leaves the "
    "chunk dim of the specs dynamic, which this stack's specs and step checks do not support."
)
KEYS_LEN_ERROR = "action_key and chunk_key lists must have the same length, got {a} and {c}."
MISSING_CHUNK_ERROR = (
    "MultiAction expected stacked actions at key {key!r} before env.step, but the key was "
    "missing. For VLA policies, use MultiAction.from_vla() or pass "
    "chunk_key=('vla_action', 'chunk'). Available keys are {keys}."
)
NO_ACTION_SPEC_ERROR = "MultiAction requires an action spec to be present."
CHUNK_LEN_ERROR = (
    "MultiAction: the action chunk at {key!r} has {got} actions along dim {dim}, "
    "expected chunk_size={expected}"
)
VLA_CHUNK_KEY = ("vla_action", "chunk")
PARTIAL_STEP = "_step"  # current torchrl's partial-step entry


def _bcast(mask: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    return mask.reshape(*mask.shape, *([1] * (value.ndim - mask.ndim)))


def _where(mask: torch.Tensor, keep: TensorDictBase, other: TensorDictBase) -> TensorDictBase:
    """Per leaf of `keep`: its value where `mask` (batch-shaped) is False, `other`'s where True."""
    out = keep.copy()
    for key in keep.keys(True, True):
        value = keep.get(key)
        replacement = other.get(key, None)
        if not isinstance(value, torch.Tensor):
            continue
        if not isinstance(replacement, torch.Tensor):
            replacement = torch.zeros_like(value)
        out.set(key, torch.where(_bcast(mask, value), replacement.to(value.dtype), value))
    return out


def _zeroed(mask: torch.Tensor, data: TensorDictBase) -> TensorDictBase:
    return data.apply(lambda v: torch.where(_bcast(mask, v), torch.zeros_like(v), v))


def _with_chunk_dim(spec: TensorSpec, position: int, size: int) -> TensorSpec:
    spec = spec.unsqueeze(position)
    shape = list(spec.shape)
    shape[position] = size
    return spec.expand(*shape)


class MultiAction(Transform):
    """Runs a chunk of actions per outer step, stepping the parent env once per action.

    The policy writes `chunk_size` actions stacked along the first dim after the batch dims
    (`dim=1`); each is stepped in turn. The outer step's output holds the last step's
    observations, and the stacked rewards of every step (`stack_rewards=True`, default; else
    the last reward) and optionally the stacked observations (`stack_observations=True`).

    A sub-env that reaches a done state inside the chunk takes no further part in it: its
    remaining slots of the reward (and observation) stacks are zero, the last reward slot
    included, and the outer step reports the observation and done flags of the step that ended
    it. The remaining steps are skipped with current torchrl's partial-step entry `"_step"`
    wherever the parent env takes it: an env that is not batch-locked, a batched env
    (`SerialEnv`, `ParallelEnv`), or any env once every row is done. A batch-locked env that
    cannot take partial steps still receives the remaining actions of the done sub-env while
    the others finish the chunk (torchrl's too), and their results are discarded; so does an
    env that is not batch-locked for the last action of the chunk (it keeps no state). As in
    torchrl, when every row ends inside the chunk the outer step is a skipped step for the
    transforms after this one in the same env (a `StepCounter` or `RewardSum` there keeps its
    value); put them in an outer `TransformedEnv` (``auto_unwrap=False``) to count it.

    Torchrl leaves the chunk dim of the specs dynamic (``-1``); this stack's leaf specs have no
    dynamic dims, so `chunk_size` (our addition) is required to build them.

    Args:
        dim: where the chunk dim sits after the batch dims (default 1, right after them).
        stack_rewards: stack every step's reward (True) or keep the last one.
        stack_observations: stack every step's observations (default False).
        action_key: the one-step action the parent env takes (default: all its action keys).
        chunk_key: where the policy writes the stacked actions (default: `action_key`).
        chunk_size: the number of actions per outer step.

    Examples:
        >>> import torch
        >>> from rlmocks import CountingEnv
        >>> from rltransforms import TransformedEnv
        >>> env = TransformedEnv(CountingEnv(max_steps=20), MultiAction(chunk_size=3))
        >>> env.action_spec.shape
        torch.Size([3, 1])
        >>> policy = lambda td: td.set("action", torch.ones(3, 1, dtype=torch.int8))
        >>> r = env.rollout(2, policy)
        >>> r["next", "observation"].squeeze(-1).tolist(), r["next", "reward"].shape
        ([3, 6], torch.Size([2, 3, 1]))
    """

    def __init__(
        self,
        *,
        dim: int = 1,
        stack_rewards: bool = True,
        stack_observations: bool = False,
        action_key: NestedKey | None = None,
        chunk_key: NestedKey | None = None,
        chunk_size: int | None = None,
    ) -> None:
        if dim < 1:
            raise ValueError(DIM_ERROR.format(dim=dim))
        if action_key is None and chunk_key is not None:
            action_key = "action"
        if action_key is not None and chunk_key is None:
            chunk_key = action_key
        super().__init__(
            in_keys_inv=None if action_key is None else [action_key],
            out_keys_inv=None if chunk_key is None else [chunk_key],
        )
        self.stack_rewards = stack_rewards
        self.stack_observations = stack_observations
        self.dim = dim
        self.chunk_size = chunk_size
        self.rewards: list[TensorDictBase] = []
        self.obs: list[TensorDictBase] = []

    @classmethod
    def from_vla(cls, *, action_key: NestedKey = "action", **kwargs: Any) -> MultiAction:
        """A `MultiAction` reading its chunk at torchrl's VLA key `("vla_action", "chunk")`.

        Examples:
            >>> MultiAction.from_vla(chunk_size=4).out_keys_inv
            [('vla_action', 'chunk')]
        """
        return cls(action_key=action_key, chunk_key=VLA_CHUNK_KEY, **kwargs)

    # ------------------------------------------------------------------ specs
    def _keys(self, action_keys: list[NestedKey]) -> tuple[list[NestedKey], list[NestedKey]]:
        action_keys = list(self.in_keys_inv) or action_keys
        chunk_keys = list(self.out_keys_inv) or action_keys
        if len(action_keys) != len(chunk_keys):
            raise ValueError(KEYS_LEN_ERROR.format(a=len(action_keys), c=len(chunk_keys)))
        return action_keys, chunk_keys

    def _chunked(self, spec: TensorSpec, ndim: int) -> TensorSpec:
        if self.chunk_size is None:
            raise ValueError(CHUNK_SIZE_ERROR)
        return _with_chunk_dim(spec, ndim + self.dim - 1, self.chunk_size)

    def transform_input_spec(self, input_spec: Composite) -> Composite:
        if "full_action_spec" not in input_spec.keys():
            raise KeyError(NO_ACTION_SPEC_ERROR)
        actions = input_spec["full_action_spec"]
        keys = [unravel_key(k) for k in actions.keys(True, True)]
        action_keys, chunk_keys = self._keys(keys)
        for action_key, chunk_key in zip(action_keys, chunk_keys):
            leaf = self._chunked(actions[action_key], input_spec.ndim)
            if chunk_key != action_key:
                del actions[action_key]
            actions[chunk_key] = leaf
        return input_spec

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        groups = []
        if self.stack_rewards:
            groups.append("full_reward_spec")
        if self.stack_observations:
            groups.append("full_observation_spec")
        for group in groups:
            if group not in output_spec.keys():
                continue
            spec = output_spec[group]
            for key in list(spec.keys(True, True)):
                spec[key] = self._chunked(spec[key], output_spec.ndim)
        return output_spec

    # ------------------------------------------------------------------ data path
    def _stack(self, parts: list[TensorDictBase], ndim: int) -> TensorDictBase:
        position = ndim + self.dim - 1
        out = parts[-1].empty()
        for key in parts[-1].keys(True, True):
            out.set(key, torch.stack([part.get(key) for part in parts], position))
        return out

    def _done_rows(self, parent: Any, root: TensorDictBase) -> torch.Tensor:
        """Which sub-envs `root` (a step's root, after step_mdp) marks done, as a batch mask."""
        mask = torch.zeros(root.batch_size, dtype=torch.bool, device=root.device)
        probe = root.select(*parent.done_keys, strict=False)
        if not terminated_or_truncated(probe, full_done_spec=parent.full_done_spec, key="_reset"):
            return mask
        for key in probe.keys(True, True):
            if (key if isinstance(key, str) else key[-1]) != "_reset":
                continue
            flag = probe.get(key)
            flag = flag.reshape(*flag.shape[: root.batch_dims], -1).any(-1)
            mask = mask | flag.reshape(mask.shape)
        return mask

    def _step_mdp(self, parent: Any) -> StepMDP:
        cached = self.__dict__.get("_step_mdp_of")
        if cached is None or cached[0] is not parent:
            cached = self.__dict__["_step_mdp_of"] = (parent, StepMDP(parent, exclude_action=False))
        return cached[1]

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        parent = self.parent
        action_keys, chunk_keys = self._keys(list(parent.action_keys))
        position = tensordict.batch_dims + self.dim - 1
        chunks = {}
        for action_key, chunk_key in zip(action_keys, chunk_keys):
            chunk = tensordict.get(chunk_key, None)
            if chunk is None:
                raise KeyError(
                    MISSING_CHUNK_ERROR.format(
                        key=chunk_key, keys=list(tensordict.keys(True, True))
                    )
                )
            if self.chunk_size is not None and chunk.shape[position] != self.chunk_size:
                raise ValueError(
                    CHUNK_LEN_ERROR.format(
                        key=chunk_key,
                        got=chunk.shape[position],
                        dim=position,
                        expected=self.chunk_size,
                    )
                )
            chunks[action_key] = chunk.unbind(position)
        n = len(next(iter(chunks.values())))
        steps = [
            tensordict.empty().update({key: chunks[key][i] for key in action_keys})
            for i in range(n)
        ]
        reward_keys = list(parent.reward_keys)
        observation_keys = list(parent.observation_keys)
        # rows done inside the chunk skip the rest of it: through a "_step" mask where the
        # parent takes one (not batch-locked, or a batched env), else stepped and discarded
        partial = not parent.batch_locked or parent._supports_partial_steps
        done = torch.zeros(tensordict.batch_size, dtype=torch.bool, device=tensordict.device)
        self.rewards, self.obs = [], []
        self.__dict__["_skipped"] = None
        td = tensordict
        for action in steps[:-1]:
            if bool(done.all()):
                # every sub-env is done: the rest of the chunk is skipped (zero-filled slots)
                if self.stack_rewards:
                    self.rewards.append(_zeroed(~done, self.rewards[-1]))
                if self.stack_observations:
                    self.obs.append(_zeroed(~done, self.obs[-1]))
                continue
            some_done = bool(done.any())
            td_in = td.replace(action)
            if some_done and partial:
                td_in.set(PARTIAL_STEP, ~done)
            stepped = parent.step(td_in)
            next_td = stepped.get("next")
            if some_done and not partial:
                next_td = _where(done, next_td, td)
            if self.stack_rewards:
                self.rewards.append(_zeroed(done, next_td.select(*reward_keys)))
            if self.stack_observations:
                self.obs.append(_zeroed(done, next_td.select(*observation_keys)))
            stepped.set("next", next_td)
            td = self._step_mdp(parent)(stepped)
            done = done | self._done_rows(parent, td)
        td_out = td.replace(steps[-1])
        if not bool(done.any()):
            return td_out
        if bool(done.all()):
            # nothing steps: the env repeats this root (rlcore.placeholder_next), which must
            # then carry the stacks (the transforms' _step does not run)
            td_out.set(PARTIAL_STEP, ~done)
            self._stack_into(td_out, reward_keys, observation_keys)
        elif parent.batch_locked and parent._supports_partial_steps:
            td_out.set(PARTIAL_STEP, ~done)  # the batched env fills the done rows
        else:
            # stepped anyway, the done rows' results replaced in `_step` (an env that is not
            # batch-locked keeps no state to spoil; a batch-locked one cannot skip rows)
            self.__dict__["_skipped"] = (done, td_out)
        return td_out

    def _stack_into(
        self, root: TensorDictBase, reward_keys: list[NestedKey], observation_keys: list[NestedKey]
    ) -> None:
        """Write the chunk's stacks into `root` for a last step that every row skips."""
        ndim = root.batch_dims
        if self.stack_rewards:
            last = self.rewards[-1].apply(torch.zeros_like)
            root.update(self._stack([*self.rewards, last], ndim))
        if self.stack_observations:
            root.update(self._stack([*self.obs, root.select(*observation_keys)], ndim))

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        skipped = self.__dict__.pop("_skipped", None)
        parent = self.parent
        ndim = next_tensordict.batch_dims
        if skipped is not None:
            # the sub-envs done inside the chunk report the step that ended it
            done, root = skipped
            reward_keys = set(map(unravel_key, parent.reward_keys))
            placeholder = root.exclude(*reward_keys)
            next_tensordict = _where(done, next_tensordict, placeholder)
            for key in reward_keys:
                value = next_tensordict.get(key, None)
                if value is not None:
                    zero = torch.zeros_like(value)
                    next_tensordict.set(key, torch.where(_bcast(done, value), zero, value))
        if self.stack_rewards and self.rewards is not None:
            last = next_tensordict.select(*parent.reward_keys)
            next_tensordict.update(self._stack([*self.rewards, last], ndim))
        if self.stack_observations and self.obs is not None:
            last = next_tensordict.select(*parent.observation_keys)
            next_tensordict.update(self._stack([*self.obs, last], ndim))
        return next_tensordict

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(dim={self.dim}, chunk_size={self.chunk_size}, "
            f"stack_rewards={self.stack_rewards}, stack_observations={self.stack_observations})"
        )
