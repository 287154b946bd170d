"""`MultiStepTransform`: n-step returns of stored trajectories, computed as they are stored."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from tensordict import NestedKey, TensorDictBase

from ._base import Transform

__all__ = ["MultiStepTransform"]

N_STEPS_ERROR = "The value of n_steps must be a strictly positive integer."
MULTI_STEP_SHAPE_ERROR = (
    "tensordict shape must be compatible with the done's shape "
    "(trailing singleton dimension excluded)."
)
MULTI_STEP_DONE_ERROR = (
    "MultiStepTransform: the done flag {key!r} was not found under 'next' (keys: {keys}); "
    "pass done_key= when the flag has another name"
)


def _next(key: NestedKey) -> tuple[str, ...]:
    return ("next", *((key,) if isinstance(key, str) else key))


def _original_reward_key(key: NestedKey) -> tuple[str, ...]:
    """Where a reward's value before the n-step sum goes: `("next", ..., "original_reward")`."""
    path = _next(key)
    return (*path[:-1], "original_reward")


def _expand_right(mask: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return mask.reshape(*mask.shape, *(1,) * (target.ndim - mask.ndim)).expand_as(target)


def multi_step(
    tensordict: TensorDictBase,
    *,
    n_steps: int,
    gamma: float,
    done_key: NestedKey = "done",
    done_keys: Sequence[NestedKey] = ("done", "terminated", "truncated"),
    reward_keys: Sequence[NestedKey] = ("reward",),
    mask_key: NestedKey | None = None,
) -> TensorDictBase:
    """The n-step version of `[*B, T]` transitions (a shallow copy; the input is untouched).

    Step `t` looks `k = min(n_steps - 1, steps left in its trajectory)` steps ahead: a
    trajectory ends at a `("next", done_key)` flag or at the last step of the data. Its rewards
    become `sum_{i <= k} gamma**i * r[t + i]` (the step's own reward is kept at
    `("next", "original_reward")`), every other `"next"` entry but the done flags is the one of
    step `t + k`, and `"steps_to_next_obs"` (`k + 1`), `"gamma"` (`gamma ** (k + 1)`) and
    `"nonterminal"` (`k > 0`, False where `mask_key` is False) are added, as torchrl 0.4's
    multi-step post-processing does.
    """
    horizon = n_steps - 1
    tensordict = tensordict.clone(False)
    done = tensordict.get(_next(done_key), None)
    if done is None:
        keys = sorted(map(str, tensordict.get("next").keys(True, True)))
        raise KeyError(MULTI_STEP_DONE_ERROR.format(key=done_key, keys=keys))
    ndim = tensordict.ndim
    moved = False
    if done.shape != tensordict.shape:
        if done.shape[-1] == 1 and done.shape[:-1] == tensordict.shape:
            done = done.squeeze(-1)
        else:
            # done has more dims than the data (e.g. one flag per agent): those become batch
            # dims, the time dim goes last for the computation and comes back at the end
            try:
                tensordict.batch_size = done.shape
                tensordict = tensordict.transpose(ndim - 1, tensordict.ndim - 1)
                done = tensordict.get(_next(done_key))
            except Exception as err:  # noqa: BLE001 - re-raised with what was expected
                raise RuntimeError(MULTI_STEP_SHAPE_ERROR) from err
            moved = True
    mask = tensordict.get(mask_key, None) if mask_key is not None else None
    *batch, length = tensordict.batch_size
    time = torch.arange(length, device=done.device)
    # the last step of each step's trajectory: its next done flag, or the last step of the data
    ends = done.clone()
    ends[..., -1] = True
    last = torch.where(ends, time, length).flip(-1).cummin(-1).values.flip(-1)
    ahead = (last - time).clamp_max(horizon)

    summed = []
    for reward_key in reward_keys:
        reward = tensordict.get(_next(reward_key))
        total = torch.zeros_like(reward)
        for i in range(horizon + 1):
            index = (time + i).clamp_max(length - 1)
            shifted = reward.index_select(len(batch), index)
            total = total + torch.where(_expand_right(i <= ahead, reward), shifted, 0) * gamma**i
        summed.append(total)

    target = time + ahead
    gathered = tensordict.get("next").exclude(*reward_keys, *done_keys).gather(-1, target)
    tensordict.set("steps_to_next_obs", ahead + 1)
    for reward_key, total in zip(reward_keys, summed):
        tensordict.rename_key_(_next(reward_key), _original_reward_key(reward_key))
        tensordict.set(_next(reward_key), total)
    tensordict.get("next").update(gathered)
    tensordict.set("gamma", gamma ** (ahead + 1))
    nonterminal = ahead != 0
    if mask is not None:
        nonterminal = nonterminal & mask.reshape(*batch, length).to(nonterminal.device)
    tensordict.set("nonterminal", nonterminal)
    if moved:
        tensordict = tensordict.transpose(ndim - 1, tensordict.ndim - 1).contiguous()
        tensordict.batch_size = tensordict.batch_size[:ndim]
    return tensordict


class MultiStepTransform(Transform):
    """n-step returns for a replay buffer: its inverse rewrites stored `[*B, T]` batches.

    Each `inv` call (a replay buffer's `extend`) appends the batch to the last `n_steps` steps
    of the previous call and returns the steps that now have `n_steps` steps ahead of them
    (nothing, `None`, until that many steps were seen): so the result does not depend on how
    the trajectories were cut into batches. Each step's rewards are summed, discounted, over the
    next `n_steps` steps of its trajectory; its `"next"` entries (done flags excepted) become
    those `n_steps - 1` steps later; `"steps_to_next_obs"`, `"gamma"` and `"nonterminal"` are
    added and the step's own reward is kept at `("next", "original_reward")` (see
    `multi_step`; a nested reward `("next", *path, name)` keeps it at
    `("next", *path, "original_reward")`, where torchrl 0.4 wrote every reward's at the same
    root key). It is an inverse transform: appended to an env, stepping raises.

    Args:
        n_steps: how many steps to look ahead (may be changed between calls).
        gamma: the discount factor.
        reward_keys: the rewards under `"next"` to sum (default `["reward"]`).
        done_key: the flag under `"next"` that ends a trajectory (default `"done"`).
        done_keys: the entries under `"next"` left as they are (default
            `["done", "terminated", "truncated"]`).
        mask_key: the valid steps (False ones are never `"nonterminal"`; default `"mask"`,
            ignored when absent).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = MultiStepTransform(n_steps=2, gamma=0.5)
        >>> data = TensorDict(
        ...     {"obs": torch.arange(4.0), "next": {"obs": torch.arange(1.0, 5.0),
        ...      "reward": torch.ones(4, 1), "done": torch.zeros(4, 1, dtype=torch.bool)}},
        ...     batch_size=[4])
        >>> out = t.inv(data)  # the last 2 steps wait for the next batch
        >>> out["next", "reward"].squeeze(-1), out["next", "obs"]
        (tensor([1.5000, 1.5000]), tensor([2., 3.]))
    """

    ENV_ERR = (
        "The MultiStepTransform is only an inverse transform and can "
        "be applied exclusively to replay buffers."
    )

    def __init__(
        self,
        n_steps: int,
        gamma: float,
        *,
        reward_keys: list[NestedKey] | None = None,
        done_key: NestedKey | None = None,
        done_keys: list[NestedKey] | None = None,
        mask_key: NestedKey | None = None,
    ) -> None:
        super().__init__()
        self.n_steps = n_steps
        self.reward_keys = ["reward"] if reward_keys is None else list(reward_keys)
        self.done_key = "done" if done_key is None else done_key
        self.done_keys = ["done", "terminated", "truncated"] if done_keys is None else done_keys
        self.mask_key = "mask" if mask_key is None else mask_key
        self.gamma = gamma
        self._buffer: TensorDictBase | None = None
        self._validated = False

    @property
    def n_steps(self) -> int:
        """The look-ahead window (may be changed during training)."""
        return self._n_steps

    @n_steps.setter
    def n_steps(self, value: int) -> None:
        if not isinstance(value, int) or value < 1:
            raise ValueError(N_STEPS_ERROR)
        self._n_steps = value

    @property
    def has_inverse(self) -> bool:
        return True

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase | None:
        if not self._validated:
            if self.parent is not None:
                raise ValueError(self.ENV_ERR)
            self._validated = True
        total = self._append(tensordict)
        if total.shape[-1] < self.n_steps:
            return None
        out = multi_step(
            total,
            n_steps=self.n_steps,
            gamma=self.gamma,
            done_key=self.done_key,
            done_keys=self.done_keys,
            reward_keys=self.reward_keys,
            mask_key=self.mask_key,
        )
        return out[..., : -self.n_steps]

    def _append(self, data: TensorDictBase) -> TensorDictBase:
        """`data` after the steps kept from the previous call; keeps the last `n_steps` steps."""
        total = data if self._buffer is None else torch.cat([self._buffer, data], -1)
        self._buffer = total[..., -self.n_steps :].clone()
        return total

    def __repr__(self) -> str:
        return f"MultiStepTransform(n_steps={self.n_steps}, gamma={self.gamma})"
