"""Policy distributions: shapes, log-probabilities, deterministic values, bounds and errors."""

from __future__ import annotations

import math
import re

import pytest
import torch
from torch import distributions as D

from rlmodules import (
    Delta,
    IndependentNormal,
    MaskedCategorical,
    NormalParamExtractor,
    OneHotCategorical,
    ReparamGradientStrategy,
    TanhDelta,
    TanhNormal,
)

pytestmark = pytest.mark.filterwarnings("error")


# ---- TanhNormal


@pytest.mark.parametrize("sample_shape", [(), (4,), (2, 3)])
def test_tanh_normal_sample_and_log_prob_shapes(sample_shape):
    dist = TanhNormal(torch.zeros(5, 2), torch.ones(5, 2))
    for sample in (dist.sample(sample_shape), dist.rsample(sample_shape)):
        assert sample.shape == (*sample_shape, 5, 2)
        assert dist.log_prob(sample).shape == (*sample_shape, 5)


def test_tanh_normal_samples_stay_inside_low_high():
    dist = TanhNormal(torch.randn(1000, 3) * 10, torch.ones(1000, 3) * 5, low=-2.0, high=3.0)
    sample = dist.sample()
    assert (sample > -2.0).all() and (sample < 3.0).all()
    assert torch.isfinite(dist.log_prob(sample)).all()


def test_tanh_normal_log_prob_is_normal_log_prob_minus_tanh_jacobian():
    loc, scale = torch.randn(4, 3), torch.rand(4, 3) + 0.5
    pre_tanh = torch.randn(4, 3)
    value = pre_tanh.tanh()
    expected = (D.Normal(loc, scale).log_prob(pre_tanh) - torch.log1p(-value.pow(2))).sum(-1)
    torch.testing.assert_close(TanhNormal(loc, scale).log_prob(value), expected)


def test_tanh_normal_accepts_torchrl_040_min_max():
    dist = TanhNormal(torch.zeros(2), torch.ones(2), min=0.0, max=4.0)
    assert dist.min.item() == 0.0 and dist.max.item() == 4.0
    assert torch.equal(dist.low, dist.min) and torch.equal(dist.high, dist.max)
    assert ((dist.sample((100,)) > 0) & (dist.sample((100,)) < 4)).all()


def test_tanh_normal_rejects_both_low_and_min():
    with pytest.raises(TypeError, match=re.escape("got both low= and min= for the same bound")):
        TanhNormal(torch.zeros(2), torch.ones(2), low=0.0, min=0.0)


def test_tanh_normal_rejects_high_not_above_low():
    with pytest.raises(
        RuntimeError,
        match=re.escape("TanhNormal max values must be strictly greater than min values"),
    ):
        TanhNormal(torch.zeros(2), torch.ones(2), low=torch.tensor([0.0, 1.0]), high=1.0)


def test_tanh_normal_mode_is_the_squashed_location():
    loc = torch.tensor([[-1.0, 0.5]])
    dist = TanhNormal(loc, torch.ones(1, 2), low=-2.0, high=2.0)
    torch.testing.assert_close(dist.mode, 2.0 * loc.tanh())
    torch.testing.assert_close(dist.deterministic_sample, dist.mode)


def test_tanh_normal_mean_has_no_closed_form():
    with pytest.raises(NotImplementedError, match="does not have a closed form formula"):
        _ = TanhNormal(torch.zeros(2), torch.ones(2)).mean


def test_tanh_normal_tanh_loc_squashes_the_location():
    dist = TanhNormal(torch.tensor([100.0]), torch.ones(1), upscale=3.0, tanh_loc=True)
    torch.testing.assert_close(dist.loc, torch.tensor([3.0 * math.tanh(100.0 / 3.0)]))


def test_tanh_normal_event_dims_sets_the_summed_dims():
    value = torch.zeros(4, 3)
    assert TanhNormal(torch.zeros(4, 3), torch.ones(4, 3), event_dims=0).log_prob(value).shape == (
        4,
        3,
    )
    assert TanhNormal(torch.zeros(4, 3), torch.ones(4, 3), event_dims=2).log_prob(value).shape == ()


def test_tanh_normal_of_a_scalar_has_no_event_dim():
    dist = TanhNormal(torch.tensor(0.0), torch.tensor(1.0))
    assert dist.sample((3,)).shape == (3,)
    assert dist.log_prob(torch.tensor(0.5)).shape == ()


def test_tanh_normal_log_prob_is_finite_at_the_bounds():
    dist = TanhNormal(torch.zeros(2), torch.ones(2))
    assert torch.isfinite(dist.log_prob(torch.tensor([1.0, -1.0])))


def test_tanh_normal_rsample_carries_gradients_to_loc_and_scale():
    loc = torch.zeros(3, requires_grad=True)
    scale = torch.ones(3, requires_grad=True)
    TanhNormal(loc, scale).rsample().sum().backward()
    assert loc.grad is not None and scale.grad is not None


def test_tanh_normal_takes_a_number_or_callable_scale():
    loc = torch.zeros(3)
    assert torch.equal(TanhNormal(loc, 0.5).root_dist.scale, torch.full((3,), 0.5))
    assert torch.equal(TanhNormal(loc, torch.ones_like).root_dist.scale, torch.ones(3))


def test_tanh_normal_update_replaces_the_parameters():
    dist = TanhNormal(torch.zeros(2), torch.ones(2))
    dist.update(torch.ones(2), torch.ones(2))
    torch.testing.assert_close(dist.mode, torch.ones(2).tanh())


# ---- IndependentNormal


def test_independent_normal_sums_log_prob_over_the_event():
    loc, scale = torch.randn(4, 3), torch.rand(4, 3) + 0.1
    value = torch.randn(4, 3)
    expected = D.Normal(loc, scale).log_prob(value).sum(-1)
    torch.testing.assert_close(IndependentNormal(loc, scale).log_prob(value), expected)


def test_independent_normal_mode_and_tanh_loc():
    dist = IndependentNormal(torch.full((2,), 50.0), 1.0, upscale=5.0, tanh_loc=True)
    torch.testing.assert_close(dist.mode, torch.full((2,), 5.0 * math.tanh(10.0)))
    torch.testing.assert_close(dist.deterministic_sample, dist.mode)


# ---- Delta and TanhDelta


def test_delta_log_prob_is_plus_inf_at_param_and_minus_inf_elsewhere():
    dist = Delta(torch.tensor([[1.0, 2.0], [3.0, 4.0]]))
    value = torch.tensor([[1.0, 2.0], [3.0, 0.0]])
    assert dist.log_prob(value).tolist() == [math.inf, -math.inf]


def test_delta_samples_mode_and_mean_are_the_param():
    param = torch.randn(3, 2)
    dist = Delta(param)
    assert dist.batch_shape == (3,) and dist.event_shape == (2,)
    assert dist.sample((4,)).shape == (4, 3, 2)
    assert torch.equal(dist.mode, param) and torch.equal(dist.mean, param)
    assert torch.equal(dist.deterministic_sample, param)


def test_tanh_delta_mode_is_tanh_of_param():
    param = torch.randn(3, 2)
    torch.testing.assert_close(TanhDelta(param).mode, param.tanh())


def test_tanh_delta_with_bounds_shifts_by_the_box_centre():
    param = torch.zeros(2)
    dist = TanhDelta(param, low=0.0, high=2.0)
    torch.testing.assert_close(dist.mode, 1.0 + torch.ones(2).tanh())
    assert torch.equal(dist.min, torch.tensor(0.0))


def test_tanh_delta_rejects_high_not_above_low():
    with pytest.raises(ValueError, match=re.escape("max value has been found to be equal or less")):
        TanhDelta(torch.zeros(2), min=1.0, max=1.0)


def test_tanh_delta_mean_raises_attribute_error():
    with pytest.raises(AttributeError, match="TanhDelta mean has not analytical form"):
        _ = TanhDelta(torch.zeros(2)).mean


# ---- OneHotCategorical


def test_one_hot_categorical_samples_are_one_hot_longs():
    dist = OneHotCategorical(logits=torch.randn(5, 4))
    sample = dist.sample((3,))
    assert sample.shape == (3, 5, 4) and sample.dtype == torch.long
    assert (sample.sum(-1) == 1).all()


def test_one_hot_categorical_log_prob_reads_one_hot_values():
    logits = torch.randn(5, 4)
    sample = OneHotCategorical(logits=logits).sample()
    expected = D.Categorical(logits=logits).log_prob(sample.argmax(-1))
    torch.testing.assert_close(OneHotCategorical(logits=logits).log_prob(sample), expected)


def test_one_hot_categorical_mode_is_the_one_hot_argmax():
    dist = OneHotCategorical(probs=torch.tensor([[0.1, 0.7, 0.2]]))
    assert dist.mode.tolist() == [[0, 1, 0]]
    assert torch.equal(dist.deterministic_sample, dist.mode)


@pytest.mark.parametrize(
    "grad_method", [ReparamGradientStrategy.PassThrough, ReparamGradientStrategy.RelaxedOneHot]
)
def test_one_hot_categorical_rsample_passes_gradients(grad_method):
    logits = torch.randn(4, 3, requires_grad=True)
    sample = OneHotCategorical(logits=logits, grad_method=grad_method).rsample((2,))
    torch.testing.assert_close(sample, sample.round())  # one-hot up to rounding noise
    assert (sample.round().sum(-1) == 1).all()
    (sample * torch.randn(3)).sum().backward()
    assert logits.grad is not None and logits.grad.abs().sum() > 0


def test_one_hot_categorical_needs_exactly_one_of_logits_probs():
    with pytest.raises(ValueError, match=re.escape("Either `probs` or `logits` must be specified")):
        OneHotCategorical()


# ---- MaskedCategorical


def test_masked_categorical_never_samples_masked_outcomes():
    mask = torch.tensor([[True, False, True, False], [False, False, False, True]])
    dist = MaskedCategorical(logits=torch.zeros(2, 4), mask=mask)
    sample = dist.sample((200,))
    assert mask.gather(-1, sample.T).all()


def test_masked_categorical_log_prob_renormalises_over_allowed_outcomes():
    mask = torch.tensor([True, False, True, True])
    dist = MaskedCategorical(logits=torch.zeros(4), mask=mask)
    log_prob = dist.log_prob(torch.arange(4))
    torch.testing.assert_close(log_prob[mask], torch.full((3,), -math.log(3)))
    assert log_prob[1] == -math.inf


def test_masked_categorical_neg_inf_sets_the_masked_log_prob():
    dist = MaskedCategorical(
        logits=torch.zeros(3), mask=torch.tensor([True, False, True]), neg_inf=-1e9
    )
    assert dist.log_prob(torch.tensor(1)).item() < -1e8


def test_masked_categorical_from_probs_zeroes_masked_probabilities():
    dist = MaskedCategorical(
        probs=torch.full((4,), 0.25), mask=torch.tensor([False, True, True, True])
    )
    torch.testing.assert_close(dist.probs, torch.tensor([0.0, 1 / 3, 1 / 3, 1 / 3]))


def test_masked_categorical_mode_respects_the_mask():
    dist = MaskedCategorical(
        logits=torch.tensor([5.0, 1.0, 0.0]), mask=torch.tensor([False, True, True])
    )
    assert dist.mode.item() == 1 and dist.deterministic_sample.item() == 1


def test_masked_categorical_with_indices_samples_and_scores_listed_outcomes():
    indices = torch.tensor([[0, 2, 3], [1, 3, -1]])
    dist = MaskedCategorical(logits=torch.zeros(2, 4), indices=indices, padding_value=-1)
    sample = dist.sample((300,))
    assert set(sample[:, 0].tolist()) == {0, 2, 3}
    assert set(sample[:, 1].tolist()) == {1, 3}
    log_prob = dist.log_prob(torch.tensor([[2, 3], [1, 0]]))
    torch.testing.assert_close(log_prob[0], torch.tensor([-math.log(3), -math.log(2)]))
    assert (log_prob[1] == -math.inf).all()
    assert dist.mode.tolist() in ([0, 1], [0, 3], [2, 1], [2, 3], [3, 1], [3, 3])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"logits": torch.zeros(3)}, "A ``mask`` or some ``indices`` must be provided"),
        (
            {
                "logits": torch.zeros(3),
                "mask": torch.ones(3, dtype=torch.bool),
                "indices": torch.arange(2),
            },
            "but not both",
        ),
        (
            {
                "logits": torch.zeros(3),
                "probs": torch.ones(3) / 3,
                "mask": torch.ones(3, dtype=torch.bool),
            },
            "Either `probs` or `logits` must be specified, but not both.",
        ),
        ({"mask": torch.ones(3, dtype=torch.bool)}, "MaskedCategorical needs `logits` or `probs`"),
        (
            {"logits": torch.zeros(3), "mask": torch.ones(3)},
            "the mask must be a bool tensor",
        ),
        (
            {"logits": torch.zeros(3), "mask": torch.ones(4, dtype=torch.bool)},
            "the mask must have the shape of the logits (3,) (or broadcast to it), got (4,)",
        ),
    ],
    ids=[
        "no-mask",
        "mask-and-indices",
        "logits-and-probs",
        "no-params",
        "float-mask",
        "mask-shape",
    ],
)
def test_masked_categorical_rejects_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        MaskedCategorical(**kwargs)


# ---- NormalParamExtractor


def test_normal_param_extractor_default_maps_zero_to_scale_one():
    loc, scale = NormalParamExtractor()(torch.zeros(3, 4))
    assert loc.shape == scale.shape == (3, 2)
    torch.testing.assert_close(scale, torch.ones(3, 2))


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("exp", math.exp(0.5)),
        ("softplus", math.log1p(math.exp(0.5))),
        ("relu", 0.5),
        ("none", 0.5),
        ("expln", math.log1p(0.5) + 1),
        ("biased_softplus_2.0", None),
        ("biased_softplus_1.0_0.1", None),
    ],
)
def test_normal_param_extractor_scale_mappings(name, expected):
    _, scale = NormalParamExtractor(scale_mapping=name)(torch.tensor([0.0, 0.5]))
    if expected is None:  # biased softplus: a positive map with the named value at 0
        _, at_zero = NormalParamExtractor(scale_mapping=name)(torch.tensor([0.0, 0.0]))
        torch.testing.assert_close(at_zero, torch.tensor([float(name.split("_")[2])]))
        assert scale.item() > at_zero.item()
    else:
        torch.testing.assert_close(scale, torch.tensor([expected]))


def test_normal_param_extractor_clamps_scale_at_scale_lb():
    _, scale = NormalParamExtractor("relu", scale_lb=0.3)(torch.tensor([0.0, -5.0]))
    assert scale.item() == pytest.approx(0.3)


def test_normal_param_extractor_passes_other_inputs_through():
    loc, scale, other = NormalParamExtractor()(torch.zeros(4), torch.ones(1))
    assert torch.equal(other, torch.ones(1))


def test_normal_param_extractor_unknown_mapping_lists_choices():
    with pytest.raises(NotImplementedError, match=re.escape("Unknown mapping 'sigmoid'")):
        NormalParamExtractor("sigmoid")


def test_normal_param_extractor_bad_biased_softplus_says_how_to_write_it():
    with pytest.raises(ValueError, match=re.escape("write 'biased_softplus_<bias>'")):
        NormalParamExtractor("biased_softplus_one")


def test_normal_param_extractor_odd_last_dim_raises():
    with pytest.raises(ValueError, match=re.escape("must be even; got a tensor of shape (2, 3)")):
        NormalParamExtractor()(torch.zeros(2, 3))
