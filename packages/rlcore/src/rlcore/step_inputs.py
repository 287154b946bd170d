"""The rules a step's input follows, checked against metadata read once from the specs.

Part of the step contract: every env checks its input with these rules before its ``_step``
runs (``EnvBase.step``, the rollout's stepper path, ``SerialEnv`` and ``ParallelEnv``):

- every leaf of ``full_action_spec`` must be in a step's input (``KeyError`` naming it);
- an action or state leaf must have exactly the spec's shape, batch dims included
  (``ValueError`` naming the key, the shape given and the shape expected); an env that is not
  batch-locked takes any leading dims in front of an empty batch size;
- an action or state leaf of another dtype is accepted only when every value is representable
  in the spec's dtype (``ValueError`` otherwise: no fractional value into an integer action, no
  silent wrap-around);
- a state leaf may be left out: the env then does not see it (it never sees a value from an
  earlier call in its place).

``ParallelEnv`` also carries observations (and, to a reset, done flags) to its workers: such a
leaf is passed on when it has the spec's shape and a dtype its values fit in, and otherwise
left out like a missing state leaf.

The per-step work is a loop over ``(key, shape, dtype)`` tuples; nothing walks a spec per step.
Specs holding lazy stacks (heterogeneous sub-envs) are checked per member by a tree compiled
once from each member's specs.

Examples:
    >>> from rlspecs import Bounded, Composite
    >>> rules = flat_rules({ACTION: Composite(action=Bounded(-1, 1, (1,)))})
    >>> check_flat(rules, [torch.zeros(1)], "MyEnv.step", True) is None  # nothing left out
    True
    >>> try:
    ...     check_flat(rules, [torch.zeros(3)], "MyEnv.step", True)
    ... except ValueError as err:
    ...     print(err)
    MyEnv.step: action 'action' has shape (3,), expected (1,).
"""

from __future__ import annotations

from typing import Any

import torch
from tensordict import LazyStackedTensorDict, TensorDict, TensorDictBase

from rlspecs import Composite, MultiCategorical, NonTensor, Stacked, StackedComposite
from rlspecs.private_apis import td_entries

__all__ = [
    "ACTION",
    "BAD_DTYPE",
    "BAD_SHAPE",
    "DONE",
    "MISSING_ACTION",
    "OBSERVATION",
    "STATE",
    "InputRules",
    "LeafRule",
    "TreeRules",
    "check_flat",
    "flat_rules",
    "get_many",
    "unrepresentable",
]

ACTION, STATE, OBSERVATION, DONE = "action", "state", "observation", "done"
LENIENT = (OBSERVATION, DONE)  # roles whose leaves are left out, not refused, when they do not fit
MISSING_ACTION = (
    "{where}: the input has no {key!r} entry, but every leaf of the env's full_action_spec must "
    "be given (expected shape {shape}, dtype {dtype})."
)
BAD_SHAPE = "{where}: {role} {key!r} has shape {got}, expected {expected}."
BAD_DTYPE = (
    "{where}: {role} {key!r} has dtype {got} and values that {dtype} cannot represent ({why}); "
    "cast them to {dtype} or fix the policy."
)
NOT_A_TENSOR = "{where}: {role} {key!r} should be a tensor, got {type}."
STACK_SIZE = "{where}: the input holds {got} stacked entries where the spec has {expected}."


def unrepresentable(value: torch.Tensor, dtype: torch.dtype) -> str | None:
    """Why ``value`` cannot be cast to ``dtype`` without changing a value, or None if it can.

    Floats may round (float64 -> float32) but not overflow to infinity; integers and bools must
    be whole numbers within the dtype's range (0 and 1 for bool).

    Examples:
        >>> unrepresentable(torch.tensor([1, 300]), torch.int8)
        'min 1, max 300; torch.int8 holds -128 to 127'
        >>> unrepresentable(torch.tensor([1, 2]), torch.int8) is None
        True
    """
    if value.dtype == dtype or value.numel() == 0:
        return None
    if value.is_complex() and not dtype.is_complex:
        if bool((value.imag != 0).any()):
            return "non-zero imaginary parts"
        value = value.real
    if dtype.is_floating_point or dtype.is_complex:
        cast = value.to(dtype)
        overflow = torch.isinf(cast) & ~torch.isinf(value)
        return "values overflow to infinity" if bool(overflow.any()) else None
    if value.is_floating_point():
        if not bool(torch.isfinite(value).all()):
            return "non-finite values"
        if bool((value != value.trunc()).any()):
            return "non-integer values"
    if dtype == torch.bool:
        ok = bool(((value == 0) | (value == 1)).all())
        return None if ok else "values other than 0 and 1"
    info = torch.iinfo(dtype)
    low, high = value.min(), value.max()
    # compare against the exact powers of two bounding the range (floats cannot hold iinfo.max)
    if bool(low < info.min) or bool(high >= info.max + 1):
        return f"min {_item(low)}, max {_item(high)}; {dtype} holds {info.min} to {info.max}"
    return None


def _item(value: torch.Tensor) -> Any:
    return value.item() if value.dtype != torch.bool else bool(value)


class LeafRule:
    """The expected shape and dtype of one leaf, and its role (action, state or observation).

    ``free_leading``: any dims may come in front of ``shape`` (an env that is not batch-locked,
    with an empty batch size, steps any batch). ``short``: a shape the spec takes besides its
    own (a ``MultiCategorical`` of shape ``(1,)`` samples, and accepts, values without its
    trailing dim, as in torchrl 0.4), or None.
    """

    __slots__ = ("key", "shape", "dtype", "role", "free_leading", "short")

    def __init__(
        self, key: Any, spec: Any, role: str, batch: tuple = (), free_leading: bool = False
    ):
        self.key = key
        self.role = role
        self.free_leading = free_leading
        self.short = None
        if isinstance(spec, NonTensor):
            self.shape = self.dtype = None  # carried as is
        else:
            self.shape = torch.Size((*batch, *spec.shape))
            self.dtype = spec.dtype
            if isinstance(spec, MultiCategorical) and spec.shape == (1,):
                self.short = self.shape[:-1]

    def accepts(self, value: Any, where: str) -> bool:
        """Whether ``value`` (of another shape or dtype than expected) may be passed on.

        Raises for a malformed action or state leaf; answers False for an observation that
        does not fit (it is left out).
        """
        if self.shape is None:
            return True
        problem = self._problem(value)
        if problem is None:
            return True
        if self.role in LENIENT:
            return False
        error, template, fields = problem
        raise error(template.format(where=where, role=self.role, key=self.key, **fields))

    def _problem(self, value: Any) -> tuple | None:
        """``(exception type, message template, fields)`` of what is wrong with ``value``."""
        if not isinstance(value, torch.Tensor):
            return TypeError, NOT_A_TENSOR, {"type": type(value).__name__}
        shape = value.shape
        if self.free_leading and len(shape) >= len(self.shape):
            shape = shape[len(shape) - len(self.shape) :]
        if not _same_shape(shape, self.shape) and shape != self.short:
            expected = tuple(self.shape)
            if self.free_leading:
                expected = f"(..., {', '.join(map(str, expected))})"
            return ValueError, BAD_SHAPE, {"got": tuple(value.shape), "expected": expected}
        if value.dtype != self.dtype:
            why = unrepresentable(value, self.dtype)
            if why is not None:
                return ValueError, BAD_DTYPE, {"got": value.dtype, "dtype": self.dtype, "why": why}
        return None

    def missing(self, where: str) -> KeyError:
        shape = None if self.shape is None else tuple(self.shape)
        return KeyError(
            MISSING_ACTION.format(where=where, key=self.key, shape=shape, dtype=self.dtype)
        )


def _same_shape(got: torch.Size, expected: torch.Size) -> bool:
    """Equal shapes, where -1 in ``expected`` (a heterogeneous dim) matches any size."""
    if got == expected:
        return True
    return len(got) == len(expected) and all(e in (-1, g) for g, e in zip(got, expected))


def flat_rules(
    specs: dict[str, Composite], batch: tuple = (), free_leading: bool = False
) -> list[LeafRule] | None:
    """One rule per leaf of ``specs`` (role -> Composite), or None if a lazy stack is inside."""
    rules = []
    for role, spec in specs.items():
        for key in spec.keys(True, True):
            leaf = spec[key]
            if isinstance(leaf, Stacked):
                return None
            rules.append(LeafRule(key, leaf, role, batch, free_leading))
    if any(isinstance(spec, StackedComposite) for spec in specs.values()):
        return None
    return rules


def check_flat(
    rules: list[LeafRule], values: list, where: str, require_actions: bool
) -> list[int] | None:
    """Raise on a malformed leaf; return the indices of the leaves not to pass on (or None).

    ``values[i]`` is the input's value for ``rules[i]`` (None when absent).
    """
    skipped = None
    for index, (rule, value) in enumerate(zip(rules, values)):
        if value is None:
            if rule.role == ACTION and require_actions:
                raise rule.missing(where)
        elif rule.shape is None or (value.shape == rule.shape and value.dtype is rule.dtype):
            continue
        elif rule.accepts(value, where):
            continue
        if skipped is None:
            skipped = []
        skipped.append(index)
    return skipped


class TreeRules:
    """The rules of one sub-env whose specs hold lazy stacks, compiled once into a tree.

    ``check(td)`` raises on a malformed action or state leaf and returns the keys of the leaves
    not to pass on (absent, or observations that do not fit).
    """

    def __init__(self, specs: dict[str, Composite]):
        self.trees = [_compile(spec, role, ()) for role, spec in specs.items()]

    def check(self, td: TensorDictBase, where: str, require_actions: bool) -> list:
        skipped: list = []
        for tree in self.trees:
            _check_node(td, tree, where, require_actions, skipped)
        return skipped


def _compile(spec: Composite, role: str, path: tuple) -> tuple:
    """``("stack", dim, [members])`` or ``("node", path, [(key, child or LeafRule)])``."""
    if isinstance(spec, StackedComposite):
        return ("stack", spec.dim, [_compile(member, role, path) for member in spec.members])
    children = []
    for key in spec.keys():
        sub = spec[key]
        full = (*path, key)
        if isinstance(sub, Composite):
            children.append((key, _compile(sub, role, full)))
        else:
            children.append((key, LeafRule(full if path else key, sub, role)))
    return ("node", path, children)


def _check_node(td: Any, tree: tuple, where: str, require: bool, out: list) -> None:
    if tree[0] == "stack":
        _, dim, members = tree
        if isinstance(td, LazyStackedTensorDict) and td.stack_dim == dim:
            parts = td.tensordicts
        else:
            parts = td.unbind(dim)
        if len(parts) != len(members):
            raise ValueError(STACK_SIZE.format(where=where, got=len(parts), expected=len(members)))
        for part, member in zip(parts, members):
            _check_node(part, member, where, require, out)
        return
    for key, child in tree[2]:
        try:
            value = td.get(key, None)
        except (RuntimeError, ValueError):  # members of different shapes: read per member
            value = td.unbind(0) if isinstance(td, LazyStackedTensorDict) else None
            value = _HETEROGENEOUS if value is not None else None
        if value is None:
            _missing(child, where, require, out)
        elif isinstance(child, tuple):
            if isinstance(value, TensorDictBase):
                _check_node(value, child, where, require, out)
            else:
                raise TypeError(
                    NOT_A_TENSOR.format(
                        where=where, role="entry", key=key, type=type(value).__name__
                    )
                )
        elif value is _HETEROGENEOUS or getattr(value, "is_nested", False):
            continue  # heterogeneous data: copied as a lazy stack, whose copy checks shapes
        elif not child.accepts(value, where):
            out.append(child.key)


def _missing(tree: tuple | LeafRule, where: str, require: bool, out: list) -> None:
    if isinstance(tree, LeafRule):
        if tree.role == ACTION and require:
            raise tree.missing(where)
        if tree.key not in out:
            out.append(tree.key)
    elif tree[0] == "stack":
        for member in tree[2]:
            _missing(member, where, require, out)
    else:
        for _, child in tree[2]:
            _missing(child, where, require, out)


_HETEROGENEOUS = object()  # an entry whose members have different shapes


class InputRules:
    """The input rules of one env, compiled once from its specs: a step's check in one call.

    ``roles`` maps each role checked (``ACTION``, ``STATE``, ...) to its spec; ``where`` names
    the caller in messages (``"MyEnv.step"``); ``require_actions``: a missing action leaf raises
    (else only the leaves given are checked: an env may ignore its action). Specs without lazy
    stacks give a flat list of rules (the fast path: one dict lookup and a shape and dtype
    comparison per leaf); lazily stacked specs a tree per member.

    Examples:
        >>> from tensordict import TensorDict
        >>> from rlspecs import Categorical, Composite
        >>> rules = InputRules({ACTION: Composite(action=Categorical(2, (1,)))}, "Env.step")
        >>> rules.check(TensorDict({"action": torch.ones(1, dtype=torch.int64)}, []))
        >>> try:
        ...     rules.check(TensorDict({"action": torch.full((1,), 0.5)}, []))
        ... except ValueError as err:
        ...     print(err)
        Env.step: action 'action' has dtype torch.float32 and values that torch.int64 cannot represent (non-integer values); cast them to torch.int64 or fix the policy.
    """

    __slots__ = ("where", "keys", "rules", "root", "tree", "require_actions")

    def __init__(
        self,
        roles: dict[str, Composite],
        where: str,
        free_leading: bool = False,
        require_actions: bool = True,
    ) -> None:
        self.where = where
        self.require_actions = require_actions
        self.rules = flat_rules(roles, free_leading=free_leading)
        self.tree = TreeRules(roles) if self.rules is None else None
        keys = [(r.key,) if isinstance(r.key, str) else tuple(r.key) for r in self.rules or ()]
        self.keys = keys
        # every leaf at the root: read straight from the storage dict
        self.root = all(len(key) == 1 for key in keys)

    def check(self, tensordict: TensorDictBase) -> list | None:
        """Raise on a missing action (where required) or a malformed action or state leaf;
        return what is left out (indices of ``rules`` for flat rules, keys for a tree), or None
        when nothing is."""
        rules, require_actions = self.rules, self.require_actions
        if rules is None:
            return self.tree.check(tensordict, self.where, require_actions) or None
        plain = type(tensordict) is TensorDict
        if plain and len(rules) == 1:  # one leaf (an action): of its shape and dtype, it passes
            rule, key = rules[0], self.keys[0]
            if len(key) == 1:
                value = td_entries(tensordict).get(key[0])
            else:
                value = tensordict
                for part in key:
                    value = td_entries(value).get(part) if type(value) is TensorDict else None
            if isinstance(value, torch.Tensor) and (
                rule.shape is None or (value.shape == rule.shape and value.dtype is rule.dtype)
            ):
                return None
        if plain and self.root:
            entries = td_entries(tensordict)
            values = [entries.get(key[0]) for key in self.keys]
        else:
            values = get_many(tensordict, self.keys)
        return check_flat(rules, values, self.where, require_actions)


def get_many(td: TensorDictBase, keys: list[tuple]) -> list:
    """``[td.get(key, None) for key in keys]`` for nested tuple keys (plain trees read directly).

    Examples:
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(1), "b": {"c": torch.ones(1)}}, [])
        >>> [None if v is None else v.tolist() for v in get_many(td, [("a",), ("b", "c"), ("x",)])]
        [[0.0], [1.0], None]
    """
    if type(td) is not TensorDict:
        return [td.get(key, None) for key in keys]
    out = []
    for key in keys:
        node = td
        for part in key:
            if type(node) is not TensorDict:
                node = node.get(part, None)
            else:
                node = td_entries(node).get(part)
            if node is None:
                break
        out.append(node)
    return out
