"""rltransforms.functional: cat_frames (CatFrames' offline windowing) and rgb_to_grayscale."""

from __future__ import annotations

import re

import pytest
import torch

from rltransforms import functional
from rltransforms.functional import cat_frames, rgb_to_grayscale

pytestmark = pytest.mark.filterwarnings("error")


def test_functional_module_exposes_torchrl_public_functions():
    assert sorted(functional.__all__) == ["cat_frames", "rgb_to_grayscale"]


def test_cat_frames_constant_padding_fills_before_the_first_frame():
    frames = torch.arange(8.0).view(4, 2)
    out = cat_frames(frames, N=3, dim=-1, time_dim=-2, padding="constant", padding_value=-1.0)
    assert out.tolist() == [
        [-1, -1, -1, -1, 0, 1],
        [-1, -1, 0, 1, 2, 3],
        [0, 1, 2, 3, 4, 5],
        [2, 3, 4, 5, 6, 7],
    ]


def test_cat_frames_same_padding_repeats_the_first_frame():
    frames = torch.arange(4.0).view(4, 1)
    out = cat_frames(frames, N=3, dim=-1, time_dim=-2)
    assert out.tolist() == [[0, 0, 0], [0, 0, 1], [0, 1, 2], [1, 2, 3]]


def test_cat_frames_done_mask_pads_across_trajectory_boundaries():
    # a trajectory starts at step 2: its first window slots reach into the previous one
    frames = torch.arange(4.0).view(4, 1)
    mask = torch.tensor([[1, 1, 0], [1, 0, 0], [1, 1, 0], [1, 0, 0]], dtype=torch.bool)
    same = cat_frames(frames, N=3, dim=-1, time_dim=-2, done_mask=mask)
    assert same.tolist() == [[0, 0, 0], [0, 0, 1], [2, 2, 2], [2, 2, 3]]
    constant = cat_frames(frames, N=3, dim=-1, time_dim=-2, padding="constant", done_mask=mask)
    assert constant.tolist() == [[0, 0, 0], [0, 0, 1], [0, 0, 2], [0, 2, 3]]


def test_cat_frames_accepts_a_done_mask_with_a_singleton_feature_dim():
    frames = torch.arange(4.0).view(4, 1)
    mask = torch.zeros(4, 1, 2, dtype=torch.bool)
    out = cat_frames(frames, N=2, dim=-1, time_dim=-2, done_mask=mask)
    assert out[1:].tolist() == [[0, 1], [1, 2], [2, 3]]


def test_cat_frames_windows_each_batch_row_and_keeps_dtype():
    frames = torch.arange(12, dtype=torch.int64).view(2, 3, 2)  # [batch, time, feature]
    out = cat_frames(frames, N=2, dim=-1, time_dim=-2, padding="constant")
    assert out.shape == (2, 3, 4) and out.dtype == torch.int64
    assert out[1, 2].tolist() == [8, 9, 10, 11]


def test_cat_frames_concatenates_along_a_dim_before_the_last():
    images = torch.arange(6.0).view(3, 1, 2)  # [time, channel, width]
    out = cat_frames(images, N=2, dim=-2, time_dim=-3)
    assert out.shape == (3, 2, 2)
    assert out[2].tolist() == [[2.0, 3.0], [4.0, 5.0]]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"dim": 0}, "dim must be < 0"),
        ({"dim": -1, "time_dim": 0}, "time_dim must be < 0."),
        (
            {"dim": -1, "padding": "zeros"},
            "padding must be one of 'same' or 'constant', got 'zeros'",
        ),
        ({"dim": -1, "done_mask": torch.zeros(3, 3, dtype=torch.bool)}, "does not line up"),
    ],
)
def test_cat_frames_rejects_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        cat_frames(torch.zeros(4, 2), N=2, **kwargs)


def test_rgb_to_grayscale_uses_luma_weights():
    img = torch.zeros(3, 1, 1)
    img[0], img[1], img[2] = 1.0, 2.0, 3.0
    gray = rgb_to_grayscale(img)
    assert gray.shape == (1, 1, 1)
    torch.testing.assert_close(gray.item(), 0.2989 + 2 * 0.587 + 3 * 0.114)


def test_rgb_to_grayscale_three_output_channels_repeat_the_gray():
    gray = rgb_to_grayscale(torch.rand(2, 3, 4, 4), num_output_channels=3)
    assert gray.shape == (2, 3, 4, 4)
    assert torch.equal(gray[:, 0], gray[:, 2])


@pytest.mark.parametrize(
    ("img", "channels", "error", "message"),
    [
        (torch.zeros(4, 4), 1, TypeError, "at least 3 dimensions"),
        (torch.zeros(2, 4, 4), 1, TypeError, "permitted channel values are [3], but found 2"),
        (torch.zeros(3, 4, 4), 2, ValueError, "num_output_channels should be either 1 or 3"),
    ],
)
def test_rgb_to_grayscale_rejects_bad_input(img, channels, error, message):
    with pytest.raises(error, match=re.escape(message)):
        rgb_to_grayscale(img, channels)
