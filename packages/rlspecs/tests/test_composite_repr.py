"""``repr`` of leaves, composites and lazy stacks in torchrl's layouts (0.4's by default)."""

from __future__ import annotations

import torch

from rlspecs import Bounded, Categorical, Composite, ContinuousBox, Unbounded, set_spec_api

BOX_3 = (
    "ContinuousBox(\n"
    "    low=Tensor(shape=torch.Size([3]), device=cpu, dtype=torch.float32, contiguous=True),\n"
    "    high=Tensor(shape=torch.Size([3]), device=cpu, dtype=torch.float32, contiguous=True))"
)
BOUNDED_3 = (
    "Bounded(\n"
    "    shape=torch.Size([3]),\n"
    "    space=ContinuousBox(\n"
    "        low=Tensor(shape=torch.Size([3]), device=cpu, dtype=torch.float32, contiguous=True),\n"
    "        high=Tensor(shape=torch.Size([3]), device=cpu, dtype=torch.float32, contiguous=True)),\n"
    "    device=cpu,\n"
    "    dtype=torch.float32,\n"
    "    domain=continuous)"
)
CATEGORICAL = (
    "Categorical(\n"
    "    shape=torch.Size([]),\n"
    "    space=CategoricalBox(n=4),\n"
    "    device=cpu,\n"
    "    dtype=torch.int64,\n"
    "    domain=discrete)"
)


def _indented(text: str) -> str:
    return text.replace("\n", "\n    ")


def test_continuous_box_repr_describes_its_tensors():
    assert repr(ContinuousBox(torch.zeros(3), torch.ones(3))) == BOX_3


def test_leaf_repr_has_one_line_per_field():
    assert repr(Bounded(0.0, 1.0, (3,), device="cpu")) == BOUNDED_3
    assert repr(Categorical(4, device="cpu")) == CATEGORICAL


def test_composite_repr_follows_torchrl_04_layout():
    spec = Composite(a=Bounded(0.0, 1.0, (3,), device="cpu"), b=Categorical(4), device="cpu")
    expected = (
        f"Composite(\n    a: {_indented(BOUNDED_3)},\n    b: {_indented(CATEGORICAL)}, "
        "device=cpu, shape=torch.Size([]))"
    )
    assert repr(spec) == expected


def test_composite_repr_of_none_entries_and_empty_composites():
    assert repr(Composite()) == "Composite(\n, device=None, shape=torch.Size([]))"
    assert repr(Composite(act=None, shape=(2,))) == (
        "Composite(\n    act: None, device=None, shape=torch.Size([2]))"
    )


def test_nested_composite_repr_is_indented_once_more():
    inner = Composite(x=Categorical(4), device="cpu")
    text = repr(Composite(inner=inner, device="cpu"))
    assert (
        text
        == f"Composite(\n    inner: {_indented(repr(inner))}, device=cpu, shape=torch.Size([]))"
    )


def test_composite_repr_under_current_api_puts_device_and_shape_on_their_own_lines():
    spec = Composite(b=Categorical(4), device="cpu")
    with set_spec_api("current"):
        assert repr(spec) == (
            f"Composite(\n    b: {_indented(CATEGORICAL)},\n    device=cpu,\n"
            "    shape=torch.Size([]),\n    data_cls=None)"
        )
        assert repr(Composite()) == "Composite(device=None, shape=torch.Size([]), data_cls=None)"


def test_stacked_composite_repr_lists_shared_then_exclusive_fields():
    a = Composite(shared=Categorical(4), own=Categorical(4), device="cpu")
    b = Composite(shared=Categorical(4), device="cpu")
    lazy = torch.stack([a, b], 0)
    shared = Categorical(4).unsqueeze(0).expand(2)
    expected = (
        "StackedComposite(\n"
        "    fields={\n"
        f"        shared: {repr(shared).replace(chr(10), chr(10) + ' ' * 8)}}},\n"
        "    exclusive_fields={\n"
        "        0 ->\n"
        f"            own: {CATEGORICAL.replace(chr(10), chr(10) + ' ' * 12)}}},\n"
        "    device=cpu,\n"
        "    shape=torch.Size([2]),\n"
        "    stack_dim=0)"
    )
    assert repr(lazy) == expected


def test_lazy_leaf_stack_repr_names_the_member_class():
    lazy = torch.stack([Unbounded(3, device="cpu"), Unbounded(2, device="cpu")], 0)
    fields = "shape=torch.Size([2, -1]), device=cpu, dtype=torch.float32, domain=continuous"
    assert repr(lazy) == f"LazyStackedUnbounded(\n    {fields})"
    with set_spec_api("current"):
        assert repr(lazy) == f"StackedUnbounded(\n    {fields})"
