"""FastImageEnv: one pre-drawn image, copied at every reset and step."""

from __future__ import annotations

import torch

from rlmocks import FastImageEnv


def test_default_image_is_4_by_84_by_84_float():
    env = FastImageEnv()
    spec = env.observation_spec["pixels"]
    assert spec.shape == (4, 84, 84) and spec.dtype == torch.float32
    assert env.action_spec.shape == (4,)


def test_every_reset_and_step_returns_the_same_image_copied():
    env = FastImageEnv(img_shape=(2, 3, 3), batch_size=(2,))
    reset = env.reset()["pixels"]
    rollout = env.rollout(4)
    assert (rollout["next", "pixels"] == reset.unsqueeze(1)).all()
    assert rollout["next", "pixels"][:, 0].data_ptr() != reset.data_ptr()
    assert ((reset >= 0) & (reset < 1)).all()


def test_steps_reward_one_and_never_end():
    rollout = FastImageEnv(img_shape=(1, 2, 2)).rollout(6)
    assert rollout.shape == (6,)
    assert (rollout["next", "reward"] == 1).all()
    assert not rollout["next", "done"].any()


def test_image_is_drawn_from_the_global_rng():
    torch.manual_seed(0)
    first = FastImageEnv(img_shape=(1, 2, 2)).reset()["pixels"]
    torch.manual_seed(0)
    assert (FastImageEnv(img_shape=(1, 2, 2)).reset()["pixels"] == first).all()
