"""The primers a recurrent policy needs on its env: specs here, transforms from rltransforms.

A recurrent module reads its state from the root of the tensordict and writes the next state
under ``"next"``; the env must know these entries (a ``TensorDictPrimer`` transform writes
zeros at reset and carries them from step to step). The specs are computed here; the
transforms themselves live in ``rltransforms``, an optional dependency (``rlmodules[transforms]``)
imported only when a primer is built.
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any

from torch import nn

from rlspecs import Composite

__all__ = ["get_primer_specs_from_module", "get_primers_from_module"]

_NEEDS_RLTRANSFORMS = '{what} needs rltransforms: pip install "rlmodules[transforms]"'
_NO_PRIMERS = "No primers found in the module."
_CONFLICTING_PRIMERS = (
    "Two submodules need a primer for {key!r} with different specs:\n{first}\nand\n{second}\n"
    "Give their recurrent states different keys."
)
_FAILED_PRIMERS = (
    "Could not build tensordict primers from these submodules: {failures}. Continuing "
    "without them; add their primers to the env by hand."
)


def _from_rltransforms(what: str, *names: str) -> Any:
    """Imports ``names`` from rltransforms, or raises an ImportError naming the extra."""
    try:
        module = importlib.import_module("rltransforms")
    except ImportError as err:
        if err.name not in (None, "rltransforms"):
            raise  # rltransforms is there but one of its own imports failed
        raise ImportError(_NEEDS_RLTRANSFORMS.format(what=what)) from err
    found = tuple(getattr(module, name) for name in names)
    return found[0] if len(found) == 1 else found


def get_primer_specs_from_module(module: nn.Module) -> Composite:
    """The specs of every entry the recurrent submodules of ``module`` need primed.

    Gathers ``make_primer_spec()`` of each submodule that has one (``LSTMModule``,
    ``GRUModule``) in a single ``Composite``: what ``get_primers_from_module``'s primers
    hold. Empty when there is none.

    Raises:
        ValueError: when two submodules need the same key with different specs.

    Examples:
        >>> from tensordict.nn import TensorDictSequential
        >>> from rlmodules import GRUModule, LSTMModule, get_primer_specs_from_module
        >>> policy = TensorDictSequential(
        ...     LSTMModule(3, 8, in_key="obs", out_key="features"),
        ...     GRUModule(8, 4, in_keys=["features", "h"], out_keys=["out", ("next", "h")]),
        ... )
        >>> specs = get_primer_specs_from_module(policy)
        >>> sorted(specs.keys()), specs["h"].shape
        (['h', 'recurrent_state_c', 'recurrent_state_h'], torch.Size([1, 4]))
    """
    merged = Composite()
    for submodule in module.modules():
        make_spec = getattr(submodule, "make_primer_spec", None)
        if make_spec is None:
            continue
        for key, spec in make_spec().items(include_nested=True, leaves_only=True):
            current = merged.get(key, None)
            if current is not None and current != spec:
                raise ValueError(_CONFLICTING_PRIMERS.format(key=key, first=current, second=spec))
            merged[key] = spec
    return merged


def get_primers_from_module(module: nn.Module, warn: bool = True, strict: bool = True) -> Any:
    """The ``TensorDictPrimer`` transforms of every submodule of ``module`` that needs one.

    Calls ``make_tensordict_primer()`` on each submodule that has it. Needs ``rltransforms``
    (``pip install "rlmodules[transforms]"``).

    Args:
        module: the policy (or any module holding recurrent submodules).
        warn: warn when no submodule needs a primer.
        strict: let a failing ``make_tensordict_primer()`` raise; with ``False`` the failure
            is reported in one warning and the other primers are still returned.

    Returns:
        ``None`` when there is no primer, the primer when there is one, and a
        ``rltransforms.Compose`` of them otherwise.

    Raises:
        ImportError: when rltransforms is not installed and a primer is needed.

    Examples:
        >>> import warnings
        >>> from rlmodules import MLP, get_primers_from_module
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     get_primers_from_module(MLP(in_features=2, out_features=2, num_cells=[])) is None
        True
        >>> str(caught[0].message)
        'No primers found in the module.'
    """
    primers = []
    failures = []
    for submodule in module.modules():
        make_primer = getattr(submodule, "make_tensordict_primer", None)
        if make_primer is None:
            continue
        try:
            primers.append(make_primer())
        except ImportError:
            raise
        except Exception as err:
            if strict:
                raise
            failures.append(f"{type(submodule).__name__}: {err}")
    if failures:
        warnings.warn(
            _FAILED_PRIMERS.format(failures="; ".join(sorted(set(failures)))), stacklevel=2
        )
    if not primers:
        if warn:
            warnings.warn(_NO_PRIMERS, stacklevel=2)
        return None
    if len(primers) == 1:
        return primers[0]
    compose = _from_rltransforms("get_primers_from_module()", "Compose")
    return compose(*primers)
