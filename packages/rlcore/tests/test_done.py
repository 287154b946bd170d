"""terminated_or_truncated: aggregation per level, reset keys written, root prevailing."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rlcore import terminated_or_truncated
from rlcore._resets import any_true
from rlspecs import Categorical, Composite


def _flag(*values, batch=()) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.bool).reshape(*batch, -1)


def test_no_done_leaves_no_reset_key_unless_write_full_false():
    data = TensorDict({"done": torch.zeros(2, 1, dtype=torch.bool)}, [2])
    assert not terminated_or_truncated(data)
    assert "_reset" not in data.keys()
    assert not terminated_or_truncated(data, write_full_false=True)
    assert data["_reset"].shape == (2,)


def test_terminated_or_truncated_are_or_ed():
    data = TensorDict(
        {
            "terminated": _flag(False, False, batch=(2,)),
            "truncated": _flag(True, False, batch=(2,)),
        },
        [2],
    )
    assert terminated_or_truncated(data)
    assert data["_reset"].tolist() == [True, False]


def test_nested_levels_get_their_own_reset_key():
    data = TensorDict(
        {
            ("agent", "done"): torch.zeros(2, 1, dtype=torch.bool),
            ("nested", "done"): torch.ones(2, 1, dtype=torch.bool),
        },
        [2],
    )
    assert terminated_or_truncated(data)
    assert not data["agent", "_reset"].any()
    assert data["nested", "_reset"].all()


@pytest.mark.parametrize("with_spec", [True, False])
def test_root_done_prevails_over_nested(with_spec):
    leaf = Categorical(2, shape=(), dtype=torch.bool)
    spec = Composite({"done": leaf, ("agent", "done"): leaf}) if with_spec else None
    data = TensorDict({"done": [False], ("agent", "done"): [True, False]}, [])
    assert not terminated_or_truncated(data, full_done_spec=spec)
    data = TensorDict({"done": [True], ("agent", "done"): [False, False]}, [])
    assert terminated_or_truncated(data, full_done_spec=spec)


def test_spec_selects_the_leaves_read():
    spec = Composite(terminated=Categorical(2, shape=(2, 1), dtype=torch.bool), shape=(2,))
    data = TensorDict(
        {
            "terminated": torch.zeros(2, 1, dtype=torch.bool),
            "done": torch.ones(2, 1, dtype=torch.bool),
        },
        [2],
    )
    assert not terminated_or_truncated(data, full_done_spec=spec)


def test_key_none_only_reports():
    data = TensorDict({"done": torch.ones(2, 1, dtype=torch.bool)}, [2])
    assert terminated_or_truncated(data, key=None)
    assert set(data.keys()) == {"done"}


def test_custom_key_name():
    data = TensorDict({"done": torch.ones(1, dtype=torch.bool)}, [])
    assert terminated_or_truncated(data, key="_end")
    assert data["_end"].shape == ()


@pytest.mark.parametrize(
    "flag",
    [
        torch.zeros(1, dtype=torch.bool),
        torch.ones(1, 1, dtype=torch.bool),
        torch.zeros(16384, 1, dtype=torch.bool),
        torch.zeros(16384, 1, dtype=torch.bool).index_fill_(0, torch.tensor([16383]), True),
        torch.zeros(4, 6, dtype=torch.bool)[:, ::2],  # strided view
        torch.zeros(0, 1, dtype=torch.bool),
        torch.tensor([0.0, 0.5]),  # not boolean: torch's own any
        torch.tensor([[0], [3]], dtype=torch.int64),
    ],
)
def test_any_true_is_bool_of_any(flag):
    assert any_true(flag) is bool(flag.any())
