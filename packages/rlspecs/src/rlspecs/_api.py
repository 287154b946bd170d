"""Which torchrl release rlspecs follows where torchrl 0.4 and current torchrl disagree.

rlspecs follows torchrl 0.4 (the release the seed test was written against) by default;
``set_spec_api("current")`` switches the few behaviours where current torchrl (0.14) differs:

============================================  ==========================  ==========================
behaviour                                     ``"0.4"`` (default)         ``"current"``
============================================  ==========================  ==========================
``Bounded(minimum=..., maximum=...)``         accepted (old names)        ``TypeError`` (removed)
``Bounded.is_in`` of a value whose shape      ``False``, with a           ``SpecShapeError``
does not broadcast with the spec's            ``UserWarning``             (a ``RuntimeError``)
``Unbounded(shape=(1,))`` float ``.space``    ``[-inf, inf]``             the dtype's finite range
``Binary(n, shape=())``                       shape ``(n,)``              ``ValueError``
``repr(Composite)``                           0.4's layout                current torchrl's layout
============================================  ==========================  ==========================
"""

from __future__ import annotations

from typing import Any

__all__ = ["API_VERSIONS", "set_spec_api", "spec_api"]

API_VERSIONS = ("0.4", "current")
BAD_API = "unknown spec API {version!r}: expected one of {versions}"

_state = {"version": "0.4"}


def spec_api() -> str:
    """The torchrl release whose behaviour rlspecs follows now: ``"0.4"`` or ``"current"``.

    Examples:
        >>> spec_api()
        '0.4'
    """
    return _state["version"]


class set_spec_api:  # noqa: N801 - named like torch.set_grad_enabled, usable as a call or a `with`
    """Follow torchrl 0.4 (``"0.4"``, the default) or current torchrl (``"current"``).

    Called, it switches for the whole process; used in a ``with`` block, it switches back on
    exit. The behaviours it changes are listed in ``rlspecs._api``'s module docstring and the
    README.

    Examples:
        >>> from rlspecs import Bounded
        >>> with set_spec_api("current"):
        ...     try:
        ...         Bounded(minimum=0.0, maximum=1.0, shape=(1,))
        ...     except TypeError as err:
        ...         print(err)
        'maximum' has been removed. Please use 'high' instead.
        >>> spec_api()
        '0.4'
    """

    def __init__(self, version: str) -> None:
        if version not in API_VERSIONS:
            raise ValueError(BAD_API.format(version=version, versions=API_VERSIONS))
        self._previous = _state["version"]
        _state["version"] = version

    def __enter__(self) -> set_spec_api:
        return self

    def __exit__(self, *exc: Any) -> None:
        _state["version"] = self._previous


def is_current() -> bool:
    """Whether current torchrl's behaviour is selected."""
    return _state["version"] == "current"
