"""clean_worker_environ: only tensordict's broken LAZY_LEGACY_OP value is removed.

That the removal lets a child process use tensordict again is tested where tensordict is
installed (rlbatched's test_worker_environ.py).
"""

from __future__ import annotations

import os

import pytest

from rlworkers import clean_worker_environ


@pytest.mark.parametrize("value", ["True", "False"])
def test_valid_values_are_kept(monkeypatch, value):
    monkeypatch.setenv("LAZY_LEGACY_OP", value)
    clean_worker_environ()
    assert os.environ["LAZY_LEGACY_OP"] == value


def test_unset_stays_unset(monkeypatch):
    monkeypatch.delenv("LAZY_LEGACY_OP", raising=False)
    clean_worker_environ()
    assert "LAZY_LEGACY_OP" not in os.environ
