"""The rules a step's input follows (rlcore.step_inputs): what a spec's dtype can represent."""

from __future__ import annotations

import re

import pytest
import torch
from tensordict import TensorDict

from rlcore.step_inputs import unrepresentable


@pytest.mark.parametrize(
    ("value", "dtype", "why"),
    [
        (torch.tensor([1, 2]), torch.int8, None),
        (torch.tensor([-129]), torch.int8, "min -129, max -129; torch.int8 holds -128 to 127"),
        (torch.tensor([255]), torch.uint8, None),
        (torch.tensor([256.0]), torch.uint8, "min 256.0, max 256.0; torch.uint8 holds 0 to 255"),
        (torch.tensor([1.5]), torch.int64, "non-integer values"),
        (torch.tensor([float("nan")]), torch.int32, "non-finite values"),
        (
            torch.tensor([2.0**63]),
            torch.int64,
            "min 9.223372036854776e+18, max 9.22337"
            "2036854776e+18; torch.int64 holds -9223372036854775808 to 9223372036854775807",
        ),
        (torch.tensor([0, 1]), torch.bool, None),
        (torch.tensor([2]), torch.bool, "values other than 0 and 1"),
        (torch.tensor([True]), torch.int8, None),
        (torch.tensor([1e300], dtype=torch.float64), torch.float32, "values overflow to infinity"),
        (torch.tensor([0.1], dtype=torch.float64), torch.float32, None),
        (torch.tensor([70000]), torch.float16, "values overflow to infinity"),
        (torch.tensor([float("inf")]), torch.float16, None),
        (torch.tensor([1 + 1j]), torch.float32, "non-zero imaginary parts"),
        (torch.zeros(0, dtype=torch.int64), torch.int8, None),
    ],
)
def test_unrepresentable(value, dtype, why):
    assert unrepresentable(value, dtype) == why


def test_a_one_entry_multi_categorical_takes_labels_with_or_without_their_dim():
    from rlcore.step_inputs import InputRules
    from rlspecs import Composite, MultiCategorical

    rules = InputRules({"action": Composite(action=MultiCategorical([5]))}, "Env.step")
    for shape in ((), (1,)):
        rules.check(TensorDict({"action": torch.zeros(shape, dtype=torch.int64)}, []))
    with pytest.raises(ValueError, match=re.escape("has shape (2,), expected (1,)")):
        rules.check(TensorDict({"action": torch.zeros(2, dtype=torch.int64)}, []))
