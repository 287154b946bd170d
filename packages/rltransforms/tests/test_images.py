"""ToTensorImage, Resize, CenterCrop and GrayScale: data, specs, envs, models, [B, T] batches."""

from __future__ import annotations

import pytest
import torch
from _transform_b_envs import ImageEnv
from tensordict import TensorDict
from torch import nn
from torch.nn import functional as F

from rlcore import check_env_specs
from rlspecs import Bounded, Composite, Unbounded
from rltransforms import (
    CenterCrop,
    Compose,
    GrayScale,
    Resize,
    ToTensorImage,
    TransformedEnv,
)

pytestmark = pytest.mark.filterwarnings("error")


def _images(*batch, h=8, w=6):
    return torch.randint(0, 256, (*batch, h, w, 3), dtype=torch.uint8)


# ---------------------------------------------------------------------------- ToTensorImage
@pytest.mark.parametrize("batch", [(), (2,), (2, 3)])
def test_to_tensor_image_transform_no_env(batch):
    image = _images(*batch)
    out = ToTensorImage()(TensorDict(pixels=image, batch_size=batch))["pixels"]
    assert out.shape == (*batch, 3, 8, 6) and out.dtype == torch.float32
    torch.testing.assert_close(out, image.movedim(-1, -3).float() / 255)


def test_to_tensor_image_arguments():
    image = _images()
    td = TensorDict(pixels=image)
    assert ToTensorImage(unsqueeze=True)(td.clone())["pixels"].shape == (1, 3, 8, 6)
    assert ToTensorImage(from_int=False)(td.clone())["pixels"].max() > 1
    assert ToTensorImage(dtype=torch.float64)(td.clone())["pixels"].dtype == torch.float64
    odd = torch.randint(0, 256, (8, 6, 4), dtype=torch.uint8)
    kept = ToTensorImage(shape_tolerant=True)(TensorDict(pixels=odd))["pixels"]
    assert kept.shape == (8, 6, 4)  # last dim is not 3 channels: not permuted, only scaled
    floats = torch.rand(8, 6, 3)
    torch.testing.assert_close(
        ToTensorImage()(TensorDict(pixels=floats))["pixels"], floats.movedim(-1, -3)
    )
    with pytest.raises(ValueError, match="at least 3 dims"):
        ToTensorImage()(TensorDict(pixels=torch.zeros(4, 4)))


@pytest.mark.parametrize("unsqueeze", [False, True])
def test_to_tensor_image_single_trans_env_check(unsqueeze):
    env = TransformedEnv(ImageEnv(), ToTensorImage(unsqueeze=unsqueeze))
    check_env_specs(env)
    spec = env.observation_spec["pixels"]
    assert spec.shape == ((1,) if unsqueeze else ()) + (3, 8, 6)
    assert isinstance(spec, Bounded) and spec.high.max() == 1


def test_to_tensor_image_unbounded_spec():
    spec = ToTensorImage().transform_observation_spec(
        Composite(pixels=Unbounded((8, 6, 3), dtype=torch.uint8))
    )
    assert isinstance(spec["pixels"], Unbounded) and spec["pixels"].shape == (3, 8, 6)


# ---------------------------------------------------------------------------- Resize
@pytest.mark.parametrize("interpolation", ["bilinear", "bicubic", "nearest", "area"])
@pytest.mark.parametrize("batch", [(), (2,), (2, 3)])
def test_resize_transform_no_env(interpolation, batch):
    image = torch.rand(*batch, 3, 16, 12)
    out = Resize(8, 4, interpolation=interpolation)(TensorDict(pixels=image, batch_size=batch))
    assert out["pixels"].shape == (*batch, 3, 8, 4)
    kwargs = {"antialias": True} if interpolation in ("bilinear", "bicubic") else {}
    expected = F.interpolate(
        image.reshape(-1, 3, 16, 12), size=(8, 4), mode=interpolation, **kwargs
    )
    torch.testing.assert_close(out["pixels"], expected.reshape(*batch, 3, 8, 4))


def test_resize_integer_images_and_arguments():
    image = torch.randint(0, 256, (3, 16, 16), dtype=torch.uint8)
    out = Resize((8, 8))(TensorDict(pixels=image))["pixels"]
    assert out.dtype == torch.uint8 and out.shape == (3, 8, 8)
    reference = F.interpolate(image[None].float(), (8, 8), mode="bilinear", antialias=True)
    assert (out.float() - reference[0]).abs().max() <= 0.5
    same = torch.rand(3, 8, 8)
    assert Resize(8)(TensorDict(pixels=same))["pixels"] is same
    with pytest.raises(ValueError, match="interpolation must be one of"):
        Resize(8, interpolation="lanczos")


def test_resize_single_trans_env_check():
    env = TransformedEnv(ImageEnv((2,)), Compose(ToTensorImage(), Resize(4, 5)))
    check_env_specs(env)
    assert env.observation_spec["pixels"].shape == (2, 3, 4, 5)
    env = TransformedEnv(ImageEnv(), Compose(ToTensorImage(), Resize(4, 5, "bicubic")))
    check_env_specs(env)
    assert isinstance(env.observation_spec["pixels"], Unbounded)  # bicubic may overshoot


# ---------------------------------------------------------------------------- CenterCrop
def test_center_crop_transform_no_env():
    image = torch.arange(36.0).reshape(1, 6, 6)
    out = CenterCrop(2, 4)(TensorDict(pixels=image))["pixels"]
    torch.testing.assert_close(out, image[:, 2:4, 1:5])
    odd = torch.arange(25.0).reshape(1, 5, 5)
    torch.testing.assert_close(CenterCrop(2)(TensorDict(pixels=odd))["pixels"], odd[:, 2:4, 2:4])
    padded = CenterCrop(9, 7)(TensorDict(pixels=image))["pixels"]  # padded with zeros
    assert padded.shape == (1, 9, 7)
    torch.testing.assert_close(padded, F.pad(image, (0, 1, 1, 2))[:, :9, :7])
    batch = torch.rand(2, 3, 3, 16, 16)
    assert CenterCrop(20, 21)(TensorDict(pixels=batch, batch_size=[2, 3]))["pixels"].shape == (
        2,
        3,
        3,
        20,
        21,
    )


def test_center_crop_single_trans_env_check():
    env = TransformedEnv(ImageEnv(), Compose(ToTensorImage(), CenterCrop(4)))
    check_env_specs(env)
    assert env.observation_spec["pixels"].shape == (3, 4, 4)


# ---------------------------------------------------------------------------- GrayScale
def test_grayscale_transform_no_env():
    image = torch.rand(2, 3, 4, 5)
    out = GrayScale()(TensorDict(pixels=image, batch_size=[2]))["pixels"]
    expected = (0.2989 * image[:, 0] + 0.587 * image[:, 1] + 0.114 * image[:, 2]).unsqueeze(1)
    torch.testing.assert_close(out, expected)
    with pytest.raises(ValueError, match="expected 3 channels"):
        GrayScale()(TensorDict(pixels=torch.rand(4, 4, 5)))


def test_grayscale_single_trans_env_check():
    env = TransformedEnv(ImageEnv((2,)), Compose(ToTensorImage(), GrayScale()))
    check_env_specs(env)
    assert env.observation_spec["pixels"].shape == (2, 1, 8, 6)


# ---------------------------------------------------------------------------- all of them
def _pipeline(keys, out_keys):
    return Compose(
        ToTensorImage(in_keys=keys, out_keys=out_keys),
        Resize(4, 4, in_keys=out_keys),
        CenterCrop(2, in_keys=out_keys),
        GrayScale(in_keys=out_keys),
    )


def test_image_pipeline_env_vs_rb():
    """The pipeline in an env and the same pipeline on the stored [B, T] rollout agree."""
    torch.manual_seed(0)
    env = TransformedEnv(ImageEnv((2,)), _pipeline(["pixels"], ["pixels_t"]))
    check_env_specs(env)
    rollout = env.rollout(4)
    stored = rollout.exclude("pixels_t", ("next", "pixels_t"))
    offline = _pipeline(["pixels", ("next", "pixels")], ["pixels_t", ("next", "pixels_t")])
    rebuilt = offline(stored)
    assert rebuilt["pixels_t"].shape == (2, 4, 1, 2, 2)
    torch.testing.assert_close(rebuilt["pixels_t"], rollout["pixels_t"])
    torch.testing.assert_close(rebuilt["next", "pixels_t"], rollout["next", "pixels_t"])


def test_image_transforms_in_a_model_and_inverse():
    model = nn.Sequential(ToTensorImage(), Resize(4), GrayScale(), nn.Identity())
    out = model(TensorDict(pixels=_images(5), batch_size=[5]))
    assert out["pixels"].shape == (5, 1, 4, 4)
    for t in (ToTensorImage(), Resize(4), CenterCrop(2), GrayScale()):
        td = TensorDict(pixels=torch.rand(3, 4, 4))
        assert (t.inv(td)["pixels"] == td["pixels"]).all() and not t.has_inverse
