"""Yes/no switches read from environment variables, parsed one way across rlstack.

The words are those of torchrl's (and distutils') ``strtobool``, in any case; anything else
raises ``ValueError`` naming the variable, its value and the words it takes.

Examples:
    >>> truth_value("RL_WARNINGS", "Off")
    False
"""

from __future__ import annotations

__all__ = ["FALSE_WORDS", "TRUE_WORDS", "truth_value"]

TRUE_WORDS = ("y", "yes", "t", "true", "on", "1")
FALSE_WORDS = ("n", "no", "f", "false", "off", "0")
INVALID_TRUTH_VALUE = (
    "Invalid truth value {value!r} for {name}: expected one of "
    "y, yes, t, true, on, 1 or n, no, f, false, off, 0 (any case)"
)


def truth_value(name: str, value: str) -> bool:
    """``value`` (the environment variable ``name``'s) as a bool.

    Examples:
        >>> truth_value("AUTO_UNWRAP_TRANSFORMED_ENV", " YES ")
        True
        >>> truth_value("RL_WARNINGS", "sometimes")
        Traceback (most recent call last):
        ...
        ValueError: Invalid truth value 'sometimes' for RL_WARNINGS: expected one of y, yes, t, true, on, 1 or n, no, f, false, off, 0 (any case)
    """
    lowered = value.strip().lower()
    if lowered in TRUE_WORDS:
        return True
    if lowered in FALSE_WORDS:
        return False
    raise ValueError(INVALID_TRUTH_VALUE.format(value=value, name=name))
