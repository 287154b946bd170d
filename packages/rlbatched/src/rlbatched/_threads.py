"""Torch threads the main process gives up while ParallelEnv workers run."""

from __future__ import annotations

import torch


class ThreadBudget:
    """Torch threads the main process gave up for workers, shared by every ParallelEnv.

    Examples:
        >>> import torch
        >>> before = torch.get_num_threads()
        >>> ThreadBudget.take(1)
        >>> ThreadBudget.give_back(1)
        >>> torch.get_num_threads() == before
        True
    """

    base: int | None = None
    given: int = 0

    @classmethod
    def take(cls, n: int) -> None:
        """Give up ``n`` threads (the main process keeps at least one)."""
        if cls.given == 0:
            cls.base = torch.get_num_threads()
        cls.given += n
        torch.set_num_threads(max(1, cls.base - cls.given))

    @classmethod
    def give_back(cls, n: int) -> None:
        """Take back ``n`` threads given up earlier."""
        cls.given -= n
        torch.set_num_threads(cls.base if cls.given <= 0 else max(1, cls.base - cls.given))
