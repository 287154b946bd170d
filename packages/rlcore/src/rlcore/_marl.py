"""Multi-agent grouping: ``MarlGroupMapType`` and ``check_marl_grouping``."""

from __future__ import annotations

from enum import Enum

__all__ = ["MarlGroupMapType", "check_marl_grouping"]


class MarlGroupMapType(Enum):
    """Ready-made ways of grouping the agents of a multi-agent env.

    ``ALL_IN_ONE_GROUP`` puts every agent in a group named ``"agents"``;
    ``ONE_GROUP_PER_AGENT`` gives each agent a group of its own.

    Examples:
        >>> MarlGroupMapType.ALL_IN_ONE_GROUP.get_group_map(["a", "b"])
        {'agents': ['a', 'b']}
        >>> MarlGroupMapType.ONE_GROUP_PER_AGENT.get_group_map(["a", "b"])
        {'a': ['a'], 'b': ['b']}
    """

    ALL_IN_ONE_GROUP = 1
    ONE_GROUP_PER_AGENT = 2

    def get_group_map(self, agent_names: list[str]) -> dict[str, list[str]]:
        """Returns the group map (group name -> agent names) for ``agent_names``."""
        if self is MarlGroupMapType.ALL_IN_ONE_GROUP:
            return {"agents": list(agent_names)}
        return {name: [name] for name in agent_names}


def check_marl_grouping(group_map: dict[str, list[str]], agent_names: list[str]) -> None:
    """Checks that ``group_map`` puts every agent of ``agent_names`` in exactly one group.

    Raises:
        ValueError: no agents, duplicated agent names, an empty group, an unknown agent, an
            agent in two groups or in none.

    Examples:
        >>> check_marl_grouping({"agents": ["a", "b"]}, ["a", "b"])
        >>> check_marl_grouping({"agents": ["a"]}, ["a", "b"])
        Traceback (most recent call last):
        ...
        ValueError: Agent 'b' is not in any group of the group map {'agents': ['a']}
    """
    if not agent_names:
        raise ValueError("No agents passed: agent_names is empty")
    if len(set(agent_names)) != len(agent_names):
        duplicated = sorted({name for name in agent_names if agent_names.count(name) > 1})
        raise ValueError(f"Agent names must be unique, got duplicates {duplicated}")
    if len(group_map) > len(agent_names):
        raise ValueError(
            f"The group map has {len(group_map)} groups but there are only "
            f"{len(agent_names)} agents"
        )
    found = dict.fromkeys(agent_names, False)
    for group_name, group in group_map.items():
        if not group:
            raise ValueError(f"Group '{group_name}' is empty")
        for name in group:
            if name not in found:
                raise ValueError(f"Agent '{name}' of group '{group_name}' is not an env agent")
            if found[name]:
                raise ValueError(f"Agent '{name}' is in more than one group")
            found[name] = True
    missing = [name for name, seen in found.items() if not seen]
    if missing:
        raise ValueError(f"Agent '{missing[0]}' is not in any group of the group map {group_map}")
