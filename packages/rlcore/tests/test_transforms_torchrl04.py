"""Transform behaviour a torchrl 0.4 user relies on (gaps found reviewing against 0.4)."""

from __future__ import annotations

import pytest
import torch
from _transform_envs import CountEnv
from tensordict import TensorDict

from rlcore.transforms import Compose, FrameSkipTransform, Transform, TransformedEnv

pytestmark = pytest.mark.filterwarnings("error")


class DoubleActionSeen(Transform):
    """Doubles the action on the way in and records the action its `_step` is given."""

    def __init__(self) -> None:
        super().__init__(in_keys_inv=["action"])
        self.seen: list[torch.Tensor] = []

    def _inv_apply_transform(self, state):
        return state * 2

    def _step(self, tensordict, next_tensordict):
        self.seen.append(tensordict["action"].clone())
        return next_tensordict


class RecordingEnv(CountEnv):
    def _step(self, tensordict):
        self.received = tensordict["action"].clone()
        return super()._step(tensordict)


def test_step_gives_transform_step_the_original_tensordict():
    # torchrl 0.4: TransformedEnv._step inverts a copy for the base env and hands the
    # caller's (non-inverted) tensordict to transform._step
    transform = DoubleActionSeen()
    env = TransformedEnv(RecordingEnv(), transform)
    td = env.reset()
    td["action"] = torch.full((1,), 3.0)
    out = env.step(td)
    assert env.base_env.received.item() == 6.0
    assert transform.seen[0].item() == 3.0
    assert out["action"].item() == 3.0
    assert td["action"].item() == 3.0


class ActionLog(CountEnv):
    def __init__(self) -> None:
        super().__init__()
        self.actions: list[float] = []

    def _step(self, tensordict):
        self.actions.append(tensordict["action"].item())
        return super()._step(tensordict)


def test_frame_skip_after_an_inverse_inverts_the_action_once():
    # FrameSkipTransform re-steps its parent with the caller's action: inverted once per step
    env = TransformedEnv(ActionLog(), Compose(DoubleActionSeen(), FrameSkipTransform(3)))
    td = env.reset()
    td["action"] = torch.full((1,), 1.5)
    out = env.step(td)
    assert env.base_env.actions == [3.0, 3.0, 3.0]
    assert out["next", "reward"].item() == 3.0
    assert out["action"].item() == 1.5
