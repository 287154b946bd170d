"""The helpers of ``rlmocks.testing``."""

from __future__ import annotations

import multiprocessing
import pickle
import re

import pytest
import torch
from tensordict import TensorDict

from rlmocks import (
    CountingEnv,
    HeterogeneousCountingEnv,
    MultiKeyCountingEnv,
    MultiKeyCountingEnvPolicy,
    NestedCountingEnv,
)
from rlmocks.testing import (
    THREAD_COUNT_ERROR,
    check_rollout_consistency_multikey_env,
    decorate_thread_sub_func,
    get_default_devices,
    rand_reset,
)


def test_default_devices_match_the_visible_gpus():
    devices = get_default_devices()
    n = torch.cuda.device_count()
    assert all(isinstance(d, torch.device) for d in devices)
    if n == 0:
        assert devices == [torch.device("cpu")]
    elif n == 1:
        assert devices == [torch.device("cuda:0")]
    else:
        assert devices == [torch.device("cpu")] + [torch.device(f"cuda:{i}") for i in range(n)]


@pytest.mark.parametrize("batch_size", [(), (1,), (2,), (4,), (32, 5)])
def test_rand_reset_gives_reset_entries_with_at_least_one_true(batch_size):
    env = CountingEnv(batch_size=batch_size)
    reset = rand_reset(env)
    assert list(reset.keys(True, True)) == ["_reset"]
    assert reset["_reset"].shape == (*batch_size, 1)
    assert reset["_reset"].dtype == torch.bool
    assert reset["_reset"].any()


def test_rand_reset_is_always_true_without_batch():
    assert rand_reset(CountingEnv())["_reset"].tolist() == [True]


def test_rand_reset_keeps_nested_batch_sizes():
    env = NestedCountingEnv(batch_size=(2,), has_root_done=True)
    reset = rand_reset(env)
    assert set(reset.keys(True, True)) == {"_reset", ("data", "_reset")}
    assert reset["data"].batch_size == (2, 3)
    hetero = rand_reset(HeterogeneousCountingEnv(batch_size=(2,)))
    assert hetero["lazy", "_reset"].shape == (2, 3, 1)


@pytest.mark.parametrize("batch_size", [(), (1,), (2,), (32, 5)])
def test_partial_reset_with_rand_reset(batch_size, max_steps=3):
    env = CountingEnv(max_steps=max_steps, batch_size=batch_size)
    action = torch.ones((*batch_size, 1), dtype=torch.int8)
    for _ in range(max_steps + 1):
        td = env.step(TensorDict({"action": action}, batch_size))
    assert td["next", "done"].all()
    td_reset = TensorDict(rand_reset(env), batch_size=batch_size)
    td_reset.update(td.get("next").exclude("reward"))
    reset = td_reset["_reset"]
    td_reset = env.reset(td_reset)
    assert (td_reset["done"][reset] == 0).all()
    assert (td_reset["observation"][reset] == 0).all()
    assert (td_reset["done"][~reset] == 1).all()
    assert (td_reset["observation"][~reset] == max_steps + 1).all()


def test_consistency_check_rejects_a_tampered_rollout():
    env = MultiKeyCountingEnv(max_steps=2)
    td = env.rollout(5, MultiKeyCountingEnvPolicy(env.full_action_spec, deterministic=True))
    check_rollout_consistency_multikey_env(td, max_steps=2)
    td["next", "nested_1", "gift"][0] += 1
    with pytest.raises(AssertionError, match=re.escape("nested_1: a counting action must give")):
        check_rollout_consistency_multikey_env(td, max_steps=2)


def test_consistency_check_accepts_a_leading_worker_dim():
    env = MultiKeyCountingEnv(max_steps=5, batch_size=(2,))
    td = env.rollout(5, MultiKeyCountingEnvPolicy(env.full_action_spec, deterministic=True))
    check_rollout_consistency_multikey_env(td.unsqueeze(0).expand(3, *td.shape), max_steps=5)


def test_decorated_function_checks_the_thread_count():
    threads = torch.get_num_threads()
    assert decorate_thread_sub_func(lambda x: x * 2, threads)(3) == 6
    wrong = decorate_thread_sub_func(lambda: None, threads + 1)
    message = THREAD_COUNT_ERROR.format(expected=threads + 1, actual=threads)
    with pytest.raises(AssertionError, match=re.escape(message)):
        wrong()


def test_decorated_closure_pickles():
    offset = 5
    wrapped = decorate_thread_sub_func(lambda x: x + offset, torch.get_num_threads())
    assert pickle.loads(pickle.dumps(wrapped))(1) == 6


def _child(wrapped, queue):
    torch.set_num_threads(2)
    queue.put(wrapped(20))


def test_decorated_function_runs_in_a_spawned_process():
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    wrapped = decorate_thread_sub_func(lambda x: x + 1, 2)
    process = ctx.Process(target=_child, args=(wrapped, queue))
    process.start()
    try:
        assert queue.get(timeout=120) == 21
    finally:
        process.join(timeout=60)
    assert process.exitcode == 0
