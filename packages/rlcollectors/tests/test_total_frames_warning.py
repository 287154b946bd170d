"""SyncDataCollector's torchrl 0.4 warning when total_frames is not a multiple of frames_per_batch."""

from __future__ import annotations

import re
import warnings

import pytest

from rlcollectors import SyncDataCollector
from rlmocks import CountingEnv

# torchrl 0.4's text, word for word (its sentences run together)
EXPECTED = (
    "total_frames (25) is not exactly divisible by frames_per_batch (10)."
    "This means 5 additional frames will be collected."
    "To silence this message, set the environment variable RL_WARNINGS to False."
)


def _collector(total_frames, frames_per_batch=10):
    return SyncDataCollector(
        CountingEnv(max_steps=100),
        frames_per_batch=frames_per_batch,
        total_frames=total_frames,
    )


def _built_without_warnings(total_frames, frames_per_batch=10):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        collector = _collector(total_frames, frames_per_batch)
    collector.shutdown()


def test_total_frames_not_a_multiple_warns_torchrl_04_message(monkeypatch):
    monkeypatch.delenv("RL_WARNINGS", raising=False)
    with pytest.warns(UserWarning, match="^" + re.escape(EXPECTED) + "$") as record:
        collector = _collector(25)
    collector.shutdown()
    assert len(record) == 1
    assert type(record[0].message) is UserWarning


def test_warning_points_at_the_line_that_builds_the_collector(monkeypatch):
    monkeypatch.delenv("RL_WARNINGS", raising=False)
    with pytest.warns(UserWarning, match="not exactly divisible") as record:
        collector = SyncDataCollector(CountingEnv(), frames_per_batch=4, total_frames=6)
    collector.shutdown()
    assert record[0].filename == __file__


def test_warned_extra_frames_are_the_ones_collected(monkeypatch):
    monkeypatch.delenv("RL_WARNINGS", raising=False)
    with pytest.warns(UserWarning, match=r"This means 2 additional frames"):
        collector = _collector(8, frames_per_batch=5)
    assert sum(batch.numel() for batch in collector) == 8 + 2
    collector.shutdown()


@pytest.mark.parametrize("total_frames", [20, 0, -1, None])
def test_multiple_or_unlimited_total_frames_do_not_warn(monkeypatch, total_frames):
    monkeypatch.delenv("RL_WARNINGS", raising=False)
    _built_without_warnings(total_frames)


def test_none_total_frames_collects_without_limit():
    collector = SyncDataCollector(CountingEnv(), frames_per_batch=5, total_frames=None)
    assert collector.total_frames == -1
    batches = iter(collector)
    assert [next(batches).numel() for _ in range(3)] == [5, 5, 5]
    collector.shutdown()


@pytest.mark.parametrize("value", ["0", "False", "off", "NO"])
def test_rl_warnings_false_silences_the_warning(monkeypatch, value):
    monkeypatch.setenv("RL_WARNINGS", value)
    _built_without_warnings(25)


@pytest.mark.parametrize("value", ["1", "True", "yes"])
def test_rl_warnings_true_keeps_the_warning(monkeypatch, value):
    monkeypatch.setenv("RL_WARNINGS", value)
    with pytest.warns(UserWarning, match=re.escape(EXPECTED)):
        collector = _collector(25)
    collector.shutdown()


def test_rl_warnings_not_a_truth_value_raises(monkeypatch):
    monkeypatch.setenv("RL_WARNINGS", "sometimes")
    with pytest.raises(ValueError, match=r"Invalid truth value 'sometimes' for RL_WARNINGS"):
        _collector(25)


def test_multi_sync_collector_warns_as_torchrl_04s_multi_collectors(monkeypatch):
    from rlcollectors import MultiSyncDataCollector

    monkeypatch.delenv("RL_WARNINGS", raising=False)
    with pytest.warns(UserWarning, match="^" + re.escape(EXPECTED) + "$") as record:
        collector = MultiSyncDataCollector(
            [CountingEnv, CountingEnv], frames_per_batch=10, total_frames=25
        )
    collector.shutdown()
    assert record[0].filename == __file__
