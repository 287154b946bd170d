"""Moving a transition's ``"next"`` entries to the root: ``step_mdp`` and ``StepMDP``."""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import torch
from tensordict import LazyStackedTensorDict, TensorDict, TensorDictBase, is_tensor_collection
from tensordict.utils import NestedKey, is_non_tensor, unravel_key

from rlspecs.private_apis import td_entries, td_get_str, td_has_names, td_new, td_set_str

if TYPE_CHECKING:
    from rlcore._env_base import EnvBase

__all__ = ["StepMDP", "set_next", "step_mdp"]

LAZY_INTO_DENSE = "step_mdp: cannot copy a heterogeneous lazy stack into a dense tensordict"
NO_NEXT = "step_mdp: the tensordict has no 'next' entry; call env.step first"

# A key tree maps a string to ``None`` (the whole entry) or to a sub-tree (some of its entries).
KeyTree = dict[str, Any]


def _as_tuple(key: NestedKey) -> tuple[str, ...]:
    key = unravel_key(key)
    return (key,) if isinstance(key, str) else key


def _key_list(keys: NestedKey | Iterable[NestedKey]) -> list[tuple[str, ...]]:
    if isinstance(keys, (str, tuple)):
        keys = [keys]
    return [_as_tuple(key) for key in keys]


def key_tree(keys: Iterable[NestedKey]) -> KeyTree:
    """Builds a key tree: ``[("a", "b"), "c"]`` gives ``{"a": {"b": None}, "c": None}``."""
    tree: KeyTree = {}
    for key in keys:
        node = tree
        *prefix, last = _as_tuple(key)
        for part in prefix:
            if part in node and node[part] is None:
                break  # an ancestor is already selected as a whole
            node = node.setdefault(part, {})
        else:
            node[last] = None
    return tree


def _is_node(value: Any) -> bool:
    if type(value) is torch.Tensor:
        return False
    return is_tensor_collection(value) and not is_non_tensor(value)


def _set(dest: TensorDictBase, key: str, value: Any) -> None:
    td_set_str(dest, key, value)


def _members(td: TensorDictBase) -> Sequence[TensorDictBase] | None:
    return td.tensordicts if isinstance(td, LazyStackedTensorDict) else None


def copy_excluding(
    source: TensorDictBase, dest: TensorDictBase, excluded: KeyTree, skip_root: str | None = None
) -> bool:
    """Copies every entry of ``source`` into ``dest`` except the excluded ones; returns non-empty.

    Sub-tensordicts are rebuilt (never shared) so that later writes do not leak between the two.
    Heterogeneous lazy stacks are handled member by member.
    """
    members = _members(source)
    if members is not None and _members(dest) is not None:
        filled = False
        for src, dst in zip(members, dest.tensordicts):
            filled = copy_excluding(src, dst, excluded, skip_root) or filled
        return filled
    filled = False
    items = td_entries(source).items() if type(source) is TensorDict else _items(source)
    for key, value in list(items):
        if key == skip_root:
            continue
        sub = excluded.get(key, ...)
        if sub is None:
            continue
        if _is_node(value):
            sub_dest = td_get_str(dest, key, None)
            new = sub_dest is None
            if new:
                sub_dest = value.empty()
            if copy_excluding(value, sub_dest, {} if sub is ... else sub):
                if new:
                    _set(dest, key, sub_dest)
                filled = True
        elif sub is ...:
            _set(dest, key, value)
            filled = True
    return filled


def _items(source: TensorDictBase) -> list[tuple[str, Any]]:
    return [(key, td_get_str(source, key, None)) for key in source.keys()]


def copy_selected(source: TensorDictBase, dest: TensorDictBase, selected: KeyTree) -> bool:
    """Copies the entries of ``selected`` found in ``source`` into ``dest``; returns non-empty."""
    members = _members(source)
    if members is not None:
        dest_members = _members(dest)
        if dest_members is None:
            raise RuntimeError(LAZY_INTO_DENSE)
        filled = False
        for src, dst in zip(members, dest_members):
            filled = copy_selected(src, dst, selected) or filled
        return filled
    filled = False
    for key, sub in selected.items():
        value = td_get_str(source, key, None)
        if value is None:
            continue
        if sub is None:
            if _is_node(value):
                value = value.copy()
            _set(dest, key, value)
            filled = True
            continue
        if not _is_node(value):
            continue
        sub_dest = td_get_str(dest, key, None)
        new = sub_dest is None or sub_dest.batch_size != value.batch_size
        if new:
            sub_dest = value.empty()
        if copy_selected(value, sub_dest, sub):
            if new:
                _set(dest, key, sub_dest)
            filled = True
    return filled


class _NotDense(Exception):
    """The transition holds something the dense fast path does not handle."""


# The dense path builds nested nodes ``[entries, batch_size, device]`` (lists), whose entries
# map a key to a tensor or to another node, then turns them into tensordicts in one pass.


def _gather_dense(source: TensorDict, excluded: KeyTree, node: dict, skip: str | None) -> None:
    """Merges the entries of ``source`` not in ``excluded`` into ``node`` (nested dicts)."""
    for key, value in td_entries(source).items():
        if key == skip:
            continue
        sub = excluded.get(key, ...)
        if sub is None:
            continue
        if type(value) is torch.Tensor:
            if sub is ...:
                node[key] = value
            continue
        if type(value) is not TensorDict or td_has_names(value):
            raise _NotDense
        child = node.get(key)
        if child is None:
            child = node[key] = [{}, value.batch_size, value.device]
        elif type(child) is not list:
            raise _NotDense
        _gather_dense(value, {} if sub is ... else sub, child[0], None)


def _build_dense(entries: dict, batch_size: torch.Size, device: Any) -> TensorDict:
    """Builds the tensordict of a dense node; empty sub-nodes are left out."""
    for key, value in list(entries.items()):
        if type(value) is list:
            if value[0]:
                entries[key] = _build_dense(*value)
                if entries[key].is_empty():
                    del entries[key]
            else:
                del entries[key]
    return td_new(entries, batch_size, device)


def _dense_step_mdp(
    tensordict: TensorDict,
    next_td: TensorDict,
    excluded: KeyTree,
    keep_other: bool,
    exclude_action: bool,
    action_keys: NestedKey | Iterable[NestedKey],
) -> TensorDict | None:
    """``step_mdp`` for unnamed ``TensorDict`` trees of tensors; None when that does not apply."""
    if td_has_names(next_td):
        return None
    entries: dict[str, Any] = {}
    try:
        if keep_other:
            _gather_dense(tensordict, excluded, entries, "next")
        elif not exclude_action:
            root = td_entries(tensordict)
            for key in _hashable(action_keys):
                value = root.get(key) if type(key) is str else None
                if type(value) is not torch.Tensor:
                    if value is not None or type(key) is not str:
                        return None
                    continue
                entries[key] = value
        _gather_dense(next_td, excluded, entries, None)
    except _NotDense:
        return None
    return _build_dense(entries, next_td.batch_size, next_td.device)


def _hashable(keys: NestedKey | Iterable[NestedKey]) -> tuple:
    if isinstance(keys, (str, tuple)):
        return (keys,)
    return tuple(keys)


@lru_cache(maxsize=256)
def _excluded_tree(*groups: tuple) -> KeyTree:
    return key_tree([key for group in groups for key in group])


def step_mdp(
    tensordict: TensorDictBase,
    next_tensordict: TensorDictBase | None = None,
    keep_other: bool = True,
    exclude_reward: bool = True,
    exclude_done: bool = False,
    exclude_action: bool = True,
    reward_keys: NestedKey | list[NestedKey] = "reward",
    done_keys: NestedKey | list[NestedKey] = "done",
    action_keys: NestedKey | list[NestedKey] = "action",
) -> TensorDictBase:
    """Returns the root tensordict of the next step: the ``"next"`` entries moved up.

    Entries are not copied: ``out["obs"] is tensordict["next", "obs"]``. Root entries that are
    not under ``"next"`` are kept when ``keep_other``; the reward, done and action entries are
    dropped according to the ``exclude_*`` flags.

    Args:
        tensordict: a transition, as returned by ``EnvBase.step``.
        next_tensordict: optional destination, updated and returned.
        keep_other: keep root entries other than action/reward/done.
        exclude_reward: drop the reward entries.
        exclude_done: drop the done entries.
        exclude_action: drop the action entries (kept at the root otherwise).
        reward_keys: reward key(s).
        done_keys: done key(s).
        action_keys: action key(s).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"obs": torch.zeros(1), "action": torch.ones(1),
        ...     "next": {"obs": torch.ones(1), "reward": torch.ones(1)}}, [])
        >>> sorted(step_mdp(td).keys())
        ['obs']
        >>> step_mdp(td)["obs"] is td["next", "obs"]
        True
    """
    if isinstance(tensordict, LazyStackedTensorDict):
        outs = next_tensordict.unbind(tensordict.stack_dim) if next_tensordict is not None else None
        stacked = LazyStackedTensorDict.lazy_stack(
            [
                step_mdp(
                    td,
                    None,
                    keep_other,
                    exclude_reward,
                    exclude_done,
                    exclude_action,
                    reward_keys,
                    done_keys,
                    action_keys,
                )
                for td in tensordict.tensordicts
            ],
            tensordict.stack_dim,
        )
        if outs is not None:
            return next_tensordict.update(stacked)
        return stacked
    excluded_tree = _excluded_tree(
        _hashable(reward_keys) if exclude_reward else (),
        _hashable(done_keys) if exclude_done else (),
        _hashable(action_keys) if exclude_action else (),
    )
    next_td = td_get_str(tensordict, "next", None)
    if next_td is None:
        raise KeyError(NO_NEXT)
    if next_tensordict is None and type(tensordict) is TensorDict and type(next_td) is TensorDict:
        out = _dense_step_mdp(
            tensordict, next_td, excluded_tree, keep_other, exclude_action, action_keys
        )
        if out is not None:
            return out
    out = next_td.empty()
    if keep_other:
        copy_excluding(tensordict, out, excluded_tree, skip_root="next")
    elif not exclude_action:
        copy_selected(tensordict, out, _excluded_tree((), (), _hashable(action_keys)))
    copy_excluding(next_td, out, excluded_tree)
    if next_tensordict is not None:
        return next_tensordict.update(out)
    return out


class StepMDP:
    """``step_mdp`` with the key lists of an env computed once.

    Observation and done entries come from ``"next"``; root entries other than ``"next"``, the
    done/reset entries and the (non-state) rewards are kept when ``keep_other``.

    Examples:
        >>> step = StepMDP(env, exclude_action=False)
        >>> root = step(env.rand_step(env.reset()))
        >>> sorted(root.keys())
        ['action', 'done', 'observation', 'terminated']
    """

    def __init__(
        self,
        env: EnvBase,
        *,
        keep_other: bool = True,
        exclude_reward: bool = True,
        exclude_done: bool = False,
        exclude_action: bool = True,
    ) -> None:
        action_keys = _key_list(env.action_keys)
        done_keys = _key_list(env.done_keys)
        reward_keys = _key_list(env.reward_keys)
        state_keys = _key_list(env.state_keys)
        observation_keys = _key_list(env.observation_keys)
        rewards_not_state = [key for key in reward_keys if key not in state_keys]
        reset_keys = [(*key[:-1], "_reset") for key in done_keys]

        from_next = list(observation_keys)
        if not exclude_reward:
            from_next += reward_keys
        else:
            from_next += [key for key in reward_keys if key in state_keys]
        if not exclude_done:
            from_next += done_keys
        from_root = [] if exclude_action else list(action_keys)
        exclude_root = [("next",), *done_keys, *reset_keys, *rewards_not_state]
        if exclude_action:
            exclude_root += action_keys
        if keep_other:
            from_root += state_keys
        else:
            exclude_root += state_keys

        self.keep_other = keep_other
        self.exclude_from_root = key_tree(exclude_root)
        self.keys_from_root = key_tree(from_root)
        self.keys_from_next = key_tree(from_next)
        # Flat fast path: every key at the root level and plain tensordicts.
        self._flat = all(
            sub is None
            for tree in (self.exclude_from_root, self.keys_from_next)
            for sub in tree.values()
        )
        self._flat_exclude = tuple(self.exclude_from_root)
        self._flat_next = tuple(self.keys_from_next)
        self._flat_next_set = frozenset(self._flat_next)
        self._flat_next_getter = tuple_getter(self._flat_next)

    def __call__(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Returns the root of the next step for ``tensordict`` (a transition)."""
        if isinstance(tensordict, LazyStackedTensorDict):
            return LazyStackedTensorDict.lazy_stack(
                [self(td) for td in tensordict.tensordicts], tensordict.stack_dim
            )
        next_td = td_get_str(tensordict, "next", None)
        if (
            self.keep_other
            and self._flat
            and type(tensordict) is TensorDict
            and type(next_td) is TensorDict
        ):
            entries = self.shift_entries(td_entries(tensordict), td_entries(next_td))
            return td_new(entries, tensordict.batch_size, tensordict.device)
        if self.keep_other:
            out = tensordict.empty()
            copy_excluding(tensordict, out, self.exclude_from_root)
        else:
            out = next_td.empty()
            copy_selected(tensordict, out, self.keys_from_root)
        if isinstance(next_td, LazyStackedTensorDict) and not isinstance(
            out, LazyStackedTensorDict
        ):
            out = LazyStackedTensorDict.lazy_stack(
                list(out.unbind(next_td.stack_dim)), next_td.stack_dim
            )
        copy_selected(next_td, out, self.keys_from_next)
        return out

    @property
    def flat(self) -> bool:
        """Whether every key this shift moves or drops is at the root (``shift_entries``)."""
        return self.keep_other and self._flat

    def shift_entries(self, root: dict[str, Any], next_entries: dict[str, Any]) -> dict[str, Any]:
        """The root of the next step as a dict, from the storage dicts of a flat transition.

        What ``__call__`` returns for a plain tensordict when ``flat``: ``root``'s entries
        less ``"next"``, the done, reset and reward entries, then the observation and done
        entries of ``next_entries``. The rollout's stepper path shifts its dicts with it.

        Examples:
            >>> step = StepMDP(env, exclude_action=False)
            >>> data = env.rand_step(env.reset())
            >>> from rlspecs.private_apis import td_entries
            >>> root = step.shift_entries(td_entries(data), td_entries(data["next"]))
            >>> sorted(root)
            ['action', 'done', 'observation', 'terminated']
        """
        # dict copies, pops and C-level gets: a fraction of a µs a leaf (the per-key Python
        # loop it replaces cost about 0.3 µs a leaf)
        entries = dict(root)
        for key in self._flat_exclude:
            entries.pop(key, None)
        if not _all_tensors(entries.values()):
            for key, value in entries.items():
                if _is_node(value):
                    entries[key] = value.copy()
        keys = self._flat_next
        if self._flat_next_set <= next_entries.keys():
            values = self._flat_next_getter(next_entries)
            if _all_tensors(values):
                entries.update(zip(keys, values))
            else:
                for key, value in zip(keys, values):
                    entries[key] = value.copy() if _is_node(value) else value
        else:
            for key in keys:
                value = next_entries.get(key)
                if value is not None:
                    entries[key] = value.copy() if _is_node(value) else value
        return entries

    def shift_layout(
        self, root_keys: Sequence[str], next_keys: Sequence[str]
    ) -> Callable[[tuple, tuple], dict[str, Any]]:
        """``shift_entries`` compiled for one layout of tensors (``flat`` shifts only):
        ``shift(root_values, next_values)`` (the values of ``root_keys`` and ``next_keys``, in
        order) gives the same dict, keys in the same order, with one C call per step.

        Examples:
            >>> shift = StepMDP(env).shift_layout(("observation", "action"), ("observation",))
            >>> shift((torch.zeros(3), torch.ones(1)), (torch.ones(3),))["observation"].tolist()
            [1.0, 1.0, 1.0]
        """
        dropped = set(self._flat_exclude)
        moved = [key for key in self._flat_next if key in next_keys]
        source = {key: i for i, key in enumerate(root_keys) if key not in dropped}
        offset = len(root_keys)
        source.update((key, offset + next_keys.index(key)) for key in moved)
        order = tuple(source)
        pick = tuple_getter(tuple(source.values()))
        return lambda root_values, next_values: dict(zip(order, pick((*root_values, *next_values))))


_TENSOR = frozenset((torch.Tensor,))


def _all_tensors(values: Iterable[Any]) -> bool:
    """Whether every value is exactly a ``torch.Tensor`` (no subclass, no tensordict)."""
    return set(map(type, values)) <= _TENSOR


def tuple_getter(keys: Sequence[Any]) -> Callable[[Any], tuple]:
    """A function returning ``tuple(items[key] for key in keys)`` in one C call (``items``: a
    dict or a sequence; ``KeyError``/``IndexError`` when one is missing).

    Examples:
        >>> tuple_getter(["b", "a"])({"a": 1, "b": 2}), tuple_getter([0])("xy")
        ((2, 1), ('x',))
    """
    if len(keys) == 1:
        (key,) = keys
        return lambda items: (items[key],)
    return operator.itemgetter(*keys) if keys else lambda items: ()


def set_next(tensordict: TensorDictBase, next_td: TensorDictBase) -> None:
    """Puts a step's output ``next_td`` under ``tensordict["next"]`` (the root/next shift's
    other half); entries the caller had put in ``"next"`` beforehand and the step did not
    write are kept."""
    plain = type(tensordict) is TensorDict
    preset = td_entries(tensordict).get("next") if plain else tensordict.get("next", None)
    if preset is not None:
        next_td.update(preset.exclude(*next_td.keys(True, True)))
    if (
        plain
        and next_td.batch_size == tensordict.batch_size
        and (tensordict.device is None or next_td.device == tensordict.device)
    ):
        td_set_str(tensordict, "next", next_td)
    else:
        tensordict.set("next", next_td)
