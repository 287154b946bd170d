"""A worker process inherits a usable environment: tensordict's broken LAZY_LEGACY_OP value,
which ``rlworkers.clean_worker_environ`` removes before a pool starts, breaks a child otherwise."""

from __future__ import annotations

import os
import subprocess
import sys

from rlworkers import clean_worker_environ

CHILD = (
    "import torch; from tensordict import TensorDict; "
    "print(TensorDict({'a': torch.zeros(2)}, [2]).unsqueeze(0).batch_size)"
)


def test_broken_value_is_removed_and_a_child_process_works(monkeypatch):
    monkeypatch.setenv("LAZY_LEGACY_OP", "None")
    broken = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True)
    assert "invalid truth value" in broken.stderr  # the failure this guards against
    clean_worker_environ()
    assert "LAZY_LEGACY_OP" not in os.environ
    fixed = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True)
    assert fixed.returncode == 0, fixed.stderr
    assert "torch.Size([1, 2])" in fixed.stdout
