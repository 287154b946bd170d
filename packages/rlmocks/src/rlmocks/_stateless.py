"""`StateLessCountingEnv`: a counter whose whole state travels in the tensordict."""

from __future__ import annotations

import torch
from tensordict import TensorDict, TensorDictBase

from rlcore import EnvBase
from rlspecs import Composite, Unbounded

__all__ = ["StateLessCountingEnv"]

MISSING_STATE = (
    "StateLessCountingEnv keeps its state in the tensordict: step needs 'count' and "
    "'max_count' (as returned by reset), got keys {keys}."
)


class StateLessCountingEnv(EnvBase):
    """A counter with no state of its own: ``count`` and ``max_count`` come with the input.

    Specs (unbatched, and the env is not batch-locked, so any input batch goes):
    observation ``count`` and ``max_count`` Unbounded int32 (1,); action ``action``
    Unbounded int32 (1,); reward Unbounded float32 (1,); done leaves ``done``,
    ``termindated`` (current torchrl's spelling, kept so the key lists match),
    ``truncated`` and the completed ``terminated``, Unbounded bool (1,).

    Reset keeps the ``count`` and ``max_count`` of its input when it holds them (a reset
    from a given state), else ``count = 0`` and ``max_count`` drawn in [10, 20) from the
    global RNG, with zero done flags. A step computes ``count + action``, passes
    ``max_count`` on, and sets ``done = terminated = count >= max_count``,
    ``truncated = False`` and a zero reward.

    Current torchrl's reset also returns a zero ``reward``, which its own
    ``check_env_specs`` rejects (a reset must not return a reward) and which a rollout
    cannot stack with the later roots; this one leaves it out, so it rolls out and passes
    ``check_env_specs``.

    Examples:
        >>> env = StateLessCountingEnv()
        >>> td = env.reset(TensorDict(max_count=torch.full((2, 1), 2, dtype=torch.int32),
        ...                           batch_size=[2]))
        >>> td["action"] = torch.ones(2, 1, dtype=torch.int32)
        >>> td = env.step(td)["next"]
        >>> td["count"].squeeze(-1).tolist(), td["done"].squeeze(-1).tolist()
        ([1, 1], [False, False])
    """

    _batch_locked = False

    def __init__(self) -> None:
        # set before EnvBase.__init__, as the current class does
        self.observation_spec = Composite(
            count=Unbounded((1,), dtype=torch.int32),
            max_count=Unbounded((1,), dtype=torch.int32),
        )
        self.full_action_spec = Composite(action=Unbounded((1,), dtype=torch.int32))
        self.full_done_spec = Composite(
            done=Unbounded((1,), dtype=torch.bool),
            termindated=Unbounded((1,), dtype=torch.bool),
            truncated=Unbounded((1,), dtype=torch.bool),
        )
        self.reward_spec = Composite(reward=Unbounded((1,), dtype=torch.float32))
        super().__init__()

    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        if tensordict is None:
            shape, device = torch.Size(()), self.device
            count = max_count = None
        else:
            shape, device = tensordict.batch_size, tensordict.device
            count = tensordict.get("count", None)
            max_count = tensordict.get("max_count", None)
        if count is None:
            count = torch.zeros((*shape, 1), dtype=torch.int32, device=device)
        if max_count is None:
            max_count = torch.randint(10, 20, (*shape, 1), dtype=torch.int32, device=device)
        result = TensorDict(
            {"count": count, "max_count": max_count}, batch_size=shape, device=device
        )
        result.update(self.full_done_spec.zero(shape))
        return result

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        count = tensordict.get("count", None)
        max_count = tensordict.get("max_count", None)
        if count is None or max_count is None:
            keys = sorted(map(str, tensordict.keys(True, True)))
            raise KeyError(MISSING_STATE.format(keys=keys))
        count = count + tensordict.get("action")
        done = count >= max_count
        return TensorDict(
            {
                "count": count,
                "max_count": max_count,
                "done": done,
                "terminated": done.clone(),
                "truncated": torch.zeros_like(done),
                "reward": self.full_reward_spec["reward"].zero(tensordict.batch_size),
            },
            batch_size=tensordict.batch_size,
            device=tensordict.device,
        )

    def _set_seed(self, seed: int | None) -> None:
        pass
