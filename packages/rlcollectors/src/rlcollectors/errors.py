"""The errors rlcollectors raises about collectors (one family under ``CollectorError``).

Each also derives from the built-in type code catching it has always caught. Failures of worker
processes are ``rlworkers.errors``'.
"""

from __future__ import annotations

__all__ = ["ActorRestartedError", "CollectorError"]


class CollectorError(Exception):
    """The root of rlcollectors' errors.

    Examples:
        >>> issubclass(ActorRestartedError, CollectorError)
        True
    """


class ActorRestartedError(CollectorError, RuntimeError):
    """Raised by a Ray actor that Ray restarted, until ``RayCollector`` restores it.

    Examples:
        >>> isinstance(ActorRestartedError("restarted"), RuntimeError)
        True
    """
