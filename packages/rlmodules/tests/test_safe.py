"""SafeModule: output specs, projection when safe, and errors on bad input or configuration."""

from __future__ import annotations

import re

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import set_skip_existing
from torch import nn

from rlmodules import SafeModule
from rlspecs import Bounded, Composite, Unbounded

pytestmark = pytest.mark.filterwarnings("error")


class _TwoHeads(nn.Module):
    def forward(self, x):
        return x * 100, -x * 100


def _obs(n=4, d=3, value=10.0):
    return TensorDict(obs=torch.full((n, d), value), batch_size=[n])


def test_safe_module_projects_output_into_leaf_spec():
    module = SafeModule(
        lambda x: x * 100,
        in_keys=["obs"],
        out_keys=["action"],
        spec=Bounded(-1.0, 1.0, shape=(3,)),
        safe=True,
    )
    out = module(_obs())
    assert (out["action"] == 1.0).all()


def test_unsafe_module_keeps_output_outside_spec():
    module = SafeModule(
        lambda x: x * 100, in_keys=["obs"], out_keys=["action"], spec=Bounded(-1.0, 1.0, shape=(3,))
    )
    out = module(_obs())
    assert (out["action"] == 1000.0).all()
    assert isinstance(module.spec, Composite)
    assert module.spec["action"] == Bounded(-1.0, 1.0, shape=(3,))


def test_safe_module_projects_each_out_key_of_composite_spec():
    spec = Composite(up=Bounded(-1.0, 1.0, shape=(3,)), down=Bounded(-2.0, 2.0, shape=(3,)))
    module = SafeModule(_TwoHeads(), in_keys=["obs"], out_keys=["up", "down"], spec=spec, safe=True)
    out = module(_obs())
    assert (out["up"] == 1.0).all()
    assert (out["down"] == -2.0).all()


def test_safe_module_leaves_out_keys_without_spec_unprojected():
    spec = Composite(up=Bounded(-1.0, 1.0, shape=(3,)))
    module = SafeModule(_TwoHeads(), in_keys=["obs"], out_keys=["up", "down"], spec=spec, safe=True)
    out = module(_obs())
    assert (out["up"] == 1.0).all()
    assert (out["down"] == -1000.0).all()


def test_safe_module_projects_nested_out_key():
    spec = Composite(agent=Composite(action=Bounded(0.0, 1.0, shape=(3,))))
    module = SafeModule(
        lambda x: -x, in_keys=["obs"], out_keys=[("agent", "action")], spec=spec, safe=True
    )
    out = module(_obs())
    assert (out["agent", "action"] == 0.0).all()


def test_safe_module_accepts_keyword_inputs():
    module = SafeModule(nn.Linear(3, 2), in_keys=["obs"], out_keys=["action"])
    assert module(obs=torch.zeros(5, 3)).shape == (5, 2)


def test_missing_in_key_error_names_key_and_keys_present():
    module = SafeModule(nn.Linear(3, 2), in_keys=["observation"], out_keys=["action"])
    td = TensorDict(obs=torch.zeros(3), other=TensorDict(x=torch.zeros(1)))
    expected = (
        "SafeModule could not find the in_key(s) ['observation'] in the input tensordict; "
        "keys present: ['obs', ('other', 'x')]."
    )
    with pytest.raises(KeyError, match=re.escape(expected)):
        module(td)


def test_module_errors_other_than_missing_keys_propagate_unchanged():
    def fails(x):
        raise KeyError("inner failure")

    module = SafeModule(fails, in_keys=["obs"], out_keys=["action"])
    with pytest.raises(KeyError, match="inner failure"):
        module(_obs())


def test_leaf_spec_with_several_out_keys_raises():
    with pytest.raises(
        RuntimeError, match=re.escape("A single leaf spec was given for out_keys ['a', 'b']")
    ):
        SafeModule(_TwoHeads(), in_keys=["obs"], out_keys=["a", "b"], spec=Unbounded(3))


def test_spec_key_outside_out_keys_raises():
    with pytest.raises(
        RuntimeError, match=re.escape("spec has key 'other' which is not among out_keys ['action']")
    ):
        SafeModule(
            nn.Linear(3, 3),
            in_keys=["obs"],
            out_keys=["action"],
            spec=Composite(other=Unbounded(3)),
        )


def test_safe_without_spec_raises():
    with pytest.raises(RuntimeError, match=re.escape("safe=True needs a spec")):
        SafeModule(nn.Linear(3, 3), in_keys=["obs"], out_keys=["action"], safe=True)


def test_non_spec_spec_raises_type_error():
    with pytest.raises(
        TypeError,
        match=re.escape("spec must be a TensorSpec (a leaf or a Composite) or None, got dict."),
    ):
        SafeModule(nn.Linear(3, 3), in_keys=["obs"], out_keys=["action"], spec={"action": None})


def test_random_writes_a_sample_of_the_spec():
    spec = Bounded(-1.0, 1.0, shape=(3,))
    module = SafeModule(nn.Linear(3, 3), in_keys=["obs"], out_keys=["action"], spec=spec)
    td = module.random(TensorDict(batch_size=[4]))
    assert td["action"].shape == (4, 3)
    assert spec.is_in(td["action"][0])


def test_spec_setter_accepts_leaf_for_single_out_key():
    module = SafeModule(nn.Linear(3, 3), in_keys=["obs"], out_keys=["action"])
    module.spec = Bounded(0.0, 1.0, shape=(3,))
    assert module.spec["action"] == Bounded(0.0, 1.0, shape=(3,))


def test_to_dtype_keeps_spec_and_returns_module():
    module = SafeModule(nn.Linear(3, 3), in_keys=["obs"], out_keys=["action"], spec=Unbounded(3))
    assert module.to(torch.float64) is module
    assert module.module.weight.dtype == torch.float64
    assert module.spec["action"].device == torch.device("cpu")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA required")
def test_to_cuda_moves_parameters_and_spec():
    module = SafeModule(nn.Linear(3, 3), in_keys=["obs"], out_keys=["action"], spec=Unbounded(3))
    module.to("cuda")
    assert module.module.weight.device.type == "cuda"
    assert module.spec["action"].device.type == "cuda"
    module.cpu()
    assert module.spec["action"].device == torch.device("cpu")


def test_skip_existing_context_skips_modules_whose_outputs_exist():
    module = SafeModule(lambda x: x + 1, in_keys=["obs"], out_keys=["action"])
    td = TensorDict(obs=torch.zeros(3), action=torch.full((3,), 7.0))
    with set_skip_existing(True):
        assert (module(td)["action"] == 7.0).all()
    assert (module(td)["action"] == 1.0).all()


def test_module_returning_a_dict_writes_its_out_keys():
    module = SafeModule(lambda x: {"b": -x, "a": x}, in_keys=["obs"], out_keys=["a", "b"])
    td = module(_obs())
    assert (td["a"] == 10.0).all() and (td["b"] == -10.0).all()


def test_underscore_out_key_is_not_written():
    module = SafeModule(_TwoHeads(), in_keys=["obs"], out_keys=["up", "_"])
    assert set(module(_obs()).keys()) == {"obs", "up"}


def test_not_inplace_module_returns_a_new_tensordict():
    module = SafeModule(lambda x: x + 1, in_keys=["obs"], out_keys=["action"], inplace=False)
    td = _obs()
    out = module(td)
    assert "action" in out.keys() and "action" not in td.keys()
