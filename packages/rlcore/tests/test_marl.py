"""MarlGroupMapType and check_marl_grouping."""

from __future__ import annotations

import re

import pytest

from rlcore import MarlGroupMapType, check_marl_grouping


@pytest.mark.parametrize("group_type", list(MarlGroupMapType))
def test_group_maps_are_valid(group_type):
    names = ["agent_0", "agent_1"]
    check_marl_grouping(group_type.get_group_map(names), names)


def test_group_map_shapes():
    names = ["a", "b"]
    assert MarlGroupMapType.ALL_IN_ONE_GROUP.get_group_map(names) == {"agents": ["a", "b"]}
    assert MarlGroupMapType.ONE_GROUP_PER_AGENT.get_group_map(names) == {"a": ["a"], "b": ["b"]}


@pytest.mark.parametrize(
    "group_map, names, message",
    [
        ({"agents": []}, [], "No agents passed"),
        ({"agents": ["a", "a"]}, ["a", "a"], "Agent names must be unique, got duplicates ['a']"),
        ({"g1": ["a"], "g2": ["b"], "g3": ["a"]}, ["a", "b"], "The group map has 3 groups"),
        ({"g1": ["a", "b"], "g2": []}, ["a", "b"], "Group 'g2' is empty"),
        ({"g": ["a", "c"]}, ["a", "b"], "Agent 'c' of group 'g' is not an env agent"),
        ({"g": ["a"], "h": ["a"]}, ["a", "b"], "Agent 'a' is in more than one group"),
        ({"g": ["a"]}, ["a", "b"], "Agent 'b' is not in any group"),
    ],
)
def test_invalid_group_maps_raise(group_map, names, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        check_marl_grouping(group_map, names)
