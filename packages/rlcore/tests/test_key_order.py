"""``rlcore._key_order.in_order``: the contract's key order, and the moves it remembers."""

import random

import pytest
import torch
from tensordict import TensorDict

from rlcore._key_order import MAX_LAYOUTS, KeyOrder, in_order


def _key_order(keys: tuple) -> KeyOrder:
    order = KeyOrder(keys)
    order.nested, order.moves = {}, {}
    return order


def _expected(keys: list, order: tuple) -> list:
    """Spec keys in the order's order, then the others as they came."""
    return [key for key in order if key in keys] + [key for key in keys if key not in order]


def _td(keys: list) -> TensorDict:
    return TensorDict({key: torch.full((1,), float(i)) for i, key in enumerate(keys)}, [])


@pytest.mark.parametrize("seed", range(4))
def test_in_order_gives_the_contracts_order_for_any_layout(seed):
    rng = random.Random(seed)
    for _ in range(500):
        order = tuple(rng.sample("abcdefg", rng.randint(0, 7)))
        keys = rng.sample("abcdefghij", rng.randint(0, 10))
        remembered = _key_order(order)
        # a plain tuple (computed each time), a KeyOrder's first meeting and its cached moves
        for given in (order, remembered, remembered):
            td = _td(keys)
            values = {key: td[key] for key in keys}
            assert list(in_order(td, given).keys()) == _expected(keys, order), (keys, order)
            assert all(td[key] is value for key, value in values.items())


def test_a_key_order_remembers_the_moves_of_each_layout_it_met():
    order = _key_order(("obs", "reward", "done", "terminated"))
    in_order(_td(["obs", "done", "terminated", "reward"]), order)
    in_order(_td(["obs", "done", "terminated", "reward"]), order)
    assert order.moves == {
        ("obs", "done", "terminated", "reward"): ("reward", "done", "terminated")
    }
    # an env whose keys vary without end: the memory stays bounded
    for i in range(3 * MAX_LAYOUTS):
        td = in_order(_td([f"extra{i}", "done", "obs"]), order)
        assert list(td.keys()) == ["obs", "done", f"extra{i}"]
    assert len(order.moves) <= MAX_LAYOUTS


def test_a_locked_tensordict_keeps_its_order():
    td = _td(["done", "obs"]).lock_()
    assert list(in_order(td, _key_order(("obs", "done"))).keys()) == ["done", "obs"]
