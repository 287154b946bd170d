"""VecNorm: the running statistics, their specs and state, and their sharing across processes."""

from __future__ import annotations

import multiprocessing as mp
import pickle

import pytest
import torch
from _transform_b_envs import RandomDoneEnv
from _transform_envs import CountEnv
from tensordict import TensorDict
from torch import nn

from rlcore import EnvCreator, check_env_specs
from rlspecs import Bounded, Composite, Unbounded
from rltransforms import Compose, ObservationNorm, TransformedEnv, VecNorm
from rlworkers import CloudpickleBox

pytestmark = pytest.mark.filterwarnings("error")

START_METHODS = [m for m in ("fork", "spawn", "forkserver") if m in mp.get_all_start_methods()]


def test_vecnorm_single_trans_env_check():
    env = TransformedEnv(RandomDoneEnv((2,)), VecNorm())
    check_env_specs(env)
    stats = env.transform._td
    assert stats.is_shared()
    assert stats["observation_sum"].shape == (3,) and stats["reward_sum"].shape == (1,)


def test_vecnorm_standardises_a_stream():
    torch.manual_seed(0)
    t = VecNorm(in_keys=["obs"], decay=1.0)
    outs = [
        t(TensorDict(obs=torch.randn(64, 2) * 3 + 5, batch_size=[64]))["obs"] for _ in range(50)
    ]
    late = torch.cat(outs[25:])
    assert late.mean(0).abs().max() < 0.1 and (late.std(0) - 1).abs().max() < 0.1
    assert t._td["obs_count"].item() == 64 * 50


def test_vecnorm_statistics_formula():
    t = VecNorm(in_keys=["obs"], decay=0.5, eps=1e-4)
    x1, x2 = torch.tensor([[1.0], [3.0]]), torch.tensor([[5.0], [7.0]])
    t(TensorDict(obs=x1, batch_size=[2]))
    out = t(TensorDict(obs=x2, batch_size=[2]))["obs"]
    s = 0.5 * x1.sum(0) + x2.sum(0)
    ssq = 0.5 * x1.pow(2).sum(0) + x2.pow(2).sum(0)
    n = 0.5 * 2 + 2
    mean = s / n
    std = (ssq / n - mean**2).clamp_min(1e-4).sqrt()
    torch.testing.assert_close(out, (x2 - mean) / std)
    torch.testing.assert_close(t._td["obs_count"], torch.tensor([n]))


def test_vecnorm_transform_env_normalises_observations_and_rewards():
    torch.manual_seed(0)
    env = TransformedEnv(
        RandomDoneEnv((8,), p_done=0.0), VecNorm(in_keys=["observation"], decay=1.0)
    )
    rollout = env.rollout(100, break_when_any_done=False)
    obs = rollout["next", "observation"][:, 50:].reshape(-1, 3)
    assert obs.mean(0).abs().max() < 0.15 and (obs.std(0) - 1).abs().max() < 0.15
    # reset observations were counted too
    count = env.transform._td["observation_count"].item()
    assert count == 8 * 100 + 8 + rollout["next", "done"].sum().item()


def test_vecnorm_specs_become_unbounded():
    t = VecNorm(in_keys=["a", "b"], out_keys=["a", "b_norm"])
    spec = Composite(a=Bounded(-1, 1, (3,)), b=Unbounded((2,), dtype=torch.int64))
    out = t.transform_observation_spec(spec)
    assert isinstance(out["a"], Unbounded)
    assert out["b_norm"].dtype == torch.get_default_dtype() and out["b"].dtype == torch.int64


def test_vecnorm_out_keys_and_nested_keys():
    t = VecNorm(in_keys=["a", ("b", "c")], out_keys=["a_avg", ("b", "c_avg")])
    td = TensorDict({"a": torch.randn(3, 4), ("b", "c"): torch.randn(3, 4)}, [3, 4])
    out = t(td.clone())
    assert ("b", "c_avg") in out.keys(True) and "a_avg" in out.keys()
    assert (out["a"] == td["a"]).all()
    assert set(t._td.keys(True, True)) >= {("b", "c_sum"), ("b", "c_ssq"), ("b", "c_count")}


def test_vecnorm_transform_compose_and_model():
    td = TensorDict(obs=torch.randn(5, 2), batch_size=[5])
    compose = Compose(VecNorm(in_keys=["obs"]))
    assert compose(td.clone())["obs"].shape == (5, 2)
    model = nn.Sequential(VecNorm(in_keys=["obs"]), nn.Identity())
    assert model(td.clone())["obs"].shape == (5, 2)


def test_vecnorm_transform_rb():
    """A [B, T] sample updates per-feature statistics with B * T values."""
    t = VecNorm(in_keys=[("next", "observation")], decay=1.0)
    data = TensorDict({("next", "observation"): torch.randn(4, 10, 3)}, [4, 10])
    t(data)
    assert t._td["next", "observation_count"].item() == 40
    assert t._td["next", "observation_sum"].shape == (3,)


def test_vecnorm_transform_inverse_is_identity():
    t = VecNorm(in_keys=["obs"])
    td = TensorDict(obs=torch.ones(2))
    assert (t.inv(td)["obs"] == 1).all() and not t.has_inverse


def test_vecnorm_freeze():
    t = VecNorm(in_keys=["obs"], decay=1.0)
    t(TensorDict(obs=torch.randn(4, 2), batch_size=[4]))
    count = t._td["obs_count"].clone()
    t.freeze()
    out = t(TensorDict(obs=torch.randn(4, 2), batch_size=[4]))
    assert (t._td["obs_count"] == count).all() and out["obs"].shape == (4, 2)
    t.unfreeze()
    t(TensorDict(obs=torch.randn(4, 2), batch_size=[4]))
    assert (t._td["obs_count"] == count + 4).all()


def test_vecnorm_to_observation_norm():
    t = VecNorm(in_keys=["obs", "rew"], out_keys=["obs_n", "rew_n"], decay=1.0)
    with pytest.raises(RuntimeError, match="no statistics"):
        t.to_observation_norm()
    td = TensorDict(obs=torch.randn(100, 2) + 3, rew=torch.randn(100, 1), batch_size=[100])
    t(td.clone())
    norm = t.to_observation_norm()
    assert isinstance(norm, Compose) and all(isinstance(n, ObservationNorm) for n in norm)
    frozen = t.clone().freeze()
    expected = frozen(td.clone())
    got = norm(td.clone())
    torch.testing.assert_close(got["obs_n"], expected["obs_n"])
    single = VecNorm(in_keys=["obs"], decay=1.0)
    single(td.clone())
    assert isinstance(single.to_observation_norm(), ObservationNorm)


def test_vecnorm_state_dict_roundtrip():
    t0 = Compose(VecNorm(in_keys=["a", ("b", "c")], out_keys=["a_avg", ("b", "c_avg")]))
    td = TensorDict({"a": torch.randn(3, 4), ("b", "c"): torch.randn(3, 4)}, [3, 4])
    t0(td.clone())
    t0(td.clone())
    state = t0.state_dict()
    # a checkpoint (values on disk): loaded by copy into the transform's own shared memory
    copied = pickle.loads(pickle.dumps({k: {"td": v["td"].clone()} for k, v in state.items()}))
    t1 = Compose(VecNorm(in_keys=["a", ("b", "c")], out_keys=["a_avg", ("b", "c_avg")]))
    t1.load_state_dict(copied)
    assert t1[0]._td.is_shared()
    assert (t1(td.clone()) == t0(td.clone())).all()
    # a shared state dict (EnvCreator's): adopted, the two transforms share their statistics
    t2 = Compose(VecNorm(in_keys=["a", ("b", "c")], out_keys=["a_avg", ("b", "c_avg")]))
    t2.load_state_dict(state)
    assert t2[0]._td is t0[0]._td


def test_vecnorm_pickle_keeps_attributes():
    t = VecNorm()
    t2 = pickle.loads(pickle.dumps(t))
    assert t.__dict__.keys() == t2.__dict__.keys()
    for key in t.__dict__:
        assert isinstance(t2.__dict__[key], type(t.__dict__[key])), key


def test_vecnorm_shared_td_validation_and_build():
    env = RandomDoneEnv((2,))
    td = VecNorm.build_td_for_shared_vecnorm(env, ["observation"])
    assert td.is_shared() and td["observation_sum"].shape == (3,)
    a = VecNorm(in_keys=["observation"], shared_td=td, decay=1.0)
    b = VecNorm(in_keys=["observation"], shared_td=td, decay=1.0)
    TransformedEnv(RandomDoneEnv((2,), p_done=0.0), a).rollout(3)
    assert b._td["observation_count"].item() == 2 * 4  # reset + 3 steps, 2 envs, seen by b
    with pytest.raises(RuntimeError, match="shared memory or a memmap"):
        VecNorm(in_keys=["observation"], shared_td=TensorDict(observation_sum=torch.zeros(3)))
    with pytest.raises(KeyError, match="not present in the shared tensordict"):
        VecNorm(in_keys=["reward"], shared_td=td)
    with pytest.raises(KeyError, match="not in the env's specs"):
        VecNorm.build_td_for_shared_vecnorm(env, ["nope"])
    memmapped = VecNorm.build_td_for_shared_vecnorm(env, ["reward"], memmap=True)
    assert memmapped.is_memmap()


def test_vecnorm_keys_missing_from_the_env_are_skipped_with_a_warning():
    with pytest.warns(UserWarning, match="will not be normalised"):
        env = TransformedEnv(CountEnv(), VecNorm(in_keys=["observation", "pixels"]))
    check_env_specs(env)


def test_vecnorm_errors():
    t = VecNorm(in_keys=["obs"])
    with pytest.raises(KeyError, match="'obs' not found"):
        t(TensorDict(other=torch.zeros(2)))
    t(TensorDict(obs=torch.zeros(2, 3), batch_size=[2]))
    with pytest.raises(ValueError, match="do not match its statistics"):
        t(TensorDict(obs=torch.zeros(2, 4), batch_size=[2]))
    with pytest.raises(ValueError, match="shapes has 1 entries"):
        VecNorm(in_keys=["a", "b"], shapes=[(2,)])


def _make_env():
    return TransformedEnv(RandomDoneEnv(), VecNorm(in_keys=["observation"], decay=1.0))


def _run_steps(box, steps, queue):
    env = box.obj()  # boxed as ParallelEnv ships env factories (cloudpickle)
    root = env.reset()
    observations = 1
    for _ in range(steps):
        td, root = env.step_and_maybe_reset(env.rand_action(root))
        observations += 1 + int(td["next", "done"].any())  # the step's, and a reset's
    queue.put(observations)


@pytest.mark.parametrize("start_method", START_METHODS)
def test_vecnorm_statistics_shared_across_processes(start_method):
    """Envs built by one EnvCreator in several processes update the same statistics."""
    ctx = mp.get_context(start_method)
    creator = EnvCreator(_make_env)
    queue = ctx.Queue()
    procs = [
        ctx.Process(target=_run_steps, args=(CloudpickleBox(creator), n, queue)) for n in (20, 30)
    ]
    for proc in procs:
        proc.start()
    observations = sum(queue.get(timeout=120) for _ in procs)
    for proc in procs:
        proc.join(timeout=60)
        assert proc.exitcode == 0
    # every reset and step observation of both workers, read from this process
    assert creator().transform._td["observation_count"].item() == observations


def _count_rewards(box, n, queue):
    env = TransformedEnv(RandomDoneEnv((4,)), box.obj)
    td = env.reset()
    for _ in range(n):
        td = env.step_and_maybe_reset(env.rand_action(td))[1]
    queue.put(True)


@pytest.mark.parametrize("start_method", START_METHODS)
def test_vecnorm_instance_sent_to_processes_shares_its_statistics(start_method):
    """A VecNorm shipped to processes at their start carries handles to its statistics."""
    ctx = mp.get_context(start_method)
    vecnorm = VecNorm(in_keys=["reward"], decay=1.0)
    TransformedEnv(RandomDoneEnv((4,)), vecnorm)  # builds the statistics from the specs
    vecnorm.reset_parent()
    queue = ctx.Queue()
    procs = [
        ctx.Process(target=_count_rewards, args=(CloudpickleBox(vecnorm), 100, queue))
        for _ in range(2)
    ]
    for proc in procs:
        proc.start()
    assert all(queue.get(timeout=120) for _ in procs)
    for proc in procs:
        proc.join(timeout=60)
        assert proc.exitcode == 0
    # rewards are counted once per step: 2 processes x 100 steps x 4 envs
    assert vecnorm._td["reward_count"].item() == 2 * 100 * 4


def _hold_lock(box, held, release):
    with box.obj.lock:
        held.set()
        release.wait(60)


@pytest.mark.parametrize("start_method", START_METHODS)
def test_vecnorm_lock_is_shared_with_started_processes(start_method):
    """The updates of all processes are serialised by one lock."""
    ctx = mp.get_context(start_method)
    vecnorm = VecNorm(in_keys=["obs"])
    held, release = ctx.Event(), ctx.Event()
    proc = ctx.Process(target=_hold_lock, args=(CloudpickleBox(vecnorm), held, release))
    proc.start()
    try:
        assert held.wait(120)
        assert not vecnorm.lock.acquire(block=False)  # the worker holds it
    finally:
        release.set()
        proc.join(timeout=60)
    assert proc.exitcode == 0
    assert vecnorm.lock.acquire(timeout=5)
    vecnorm.lock.release()


def test_vecnorm_pickled_outside_a_process_start_copies():
    t = VecNorm(in_keys=["obs"], decay=1.0)
    t(TensorDict(obs=torch.ones(2, 3), batch_size=[2]))
    copy = pickle.loads(pickle.dumps(t))
    copy(TensorDict(obs=torch.ones(2, 3), batch_size=[2]))
    assert t._td["obs_count"].item() == 2 and copy._td["obs_count"].item() == 4


def test_new_api_true_builds_a_vecnorm_v2_as_current_torchrl():
    from rltransforms import VecNormV2

    made = VecNorm(in_keys=["observation"], new_api=True)
    assert type(made) is VecNormV2
    assert made.in_keys == ["observation"]


@pytest.mark.parametrize("new_api", [False, None])
def test_new_api_false_or_unset_is_torchrl_04s_vecnorm_without_a_warning(new_api, recwarn):
    made = VecNorm(in_keys=["observation"], new_api=new_api)
    assert type(made) is VecNorm
    assert not [w for w in recwarn if "VecNormV2" in str(w.message)]
