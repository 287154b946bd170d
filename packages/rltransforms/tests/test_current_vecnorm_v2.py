"""VecNormV2: running statistics kept in the transform (stateful) or in the data (stateless),
and shared across envs and processes."""

from __future__ import annotations

import math
import multiprocessing

import pytest
import torch
from tensordict import TensorDict

from rlcore import EnvCreator, check_env_specs
from rlmocks import ContinuousActionVecMockEnv, CountingEnv
from rlspecs import Unbounded
from rltransforms import ObservationNorm, TransformedEnv, VecNormV2

rlbatched = pytest.importorskip("rlbatched", reason="the batched-env cases need rlbatched")

pytestmark = pytest.mark.filterwarnings("error")

PARALLEL = ["fork", "spawn"] if "fork" in multiprocessing.get_all_start_methods() else ["spawn"]


def _normalised_env():
    # module level: spawned workers import it
    return TransformedEnv(
        ContinuousActionVecMockEnv(), VecNormV2(in_keys=["observation"], decay=1.0)
    )


def _feed(t, *batches):
    return [t(TensorDict(obs=x.clone(), batch_size=x.shape[:1]))["obs"] for x in batches]


def test_vecnorm_v2_plain_average_formula():
    t = VecNormV2(in_keys=["obs"], decay=1.0)
    x1, x2 = torch.tensor([[1.0], [3.0]]), torch.tensor([[5.0], [9.0]])
    _, out = _feed(t, x1, x2)
    # per sub-env running means of x and x**2 over the two updates
    mean = (x1 + x2) / 2
    std = ((x1**2 + x2**2) / 2 - mean**2).sqrt()
    torch.testing.assert_close(out, (x2 - mean) / std)
    assert t._count["obs"].item() == 2


def test_vecnorm_v2_decay_is_bias_corrected():
    t = VecNormV2(in_keys=["obs"], decay=0.5)
    x = torch.tensor([[2.0]])
    _feed(t, x)
    # one update: loc = 0.5 * x, corrected by 1 - 0.5 ** 1 back to x
    torch.testing.assert_close(t.loc["obs"], x)
    torch.testing.assert_close(t._loc["obs"], 0.5 * x)


def test_vecnorm_v2_reduce_batch_dims_pools_sub_envs():
    t = VecNormV2(in_keys=["obs"], decay=1.0, reduce_batch_dims=True)
    _feed(t, torch.tensor([[1.0], [3.0]]))
    assert t._loc["obs"].shape == (1,) and t._count["obs"].item() == 2
    torch.testing.assert_close(t.loc["obs"], torch.tensor([2.0]))


def test_vecnorm_v2_env_normalises_into_new_keys():
    env = TransformedEnv(
        ContinuousActionVecMockEnv(batch_size=[3]),
        VecNormV2(in_keys=["observation", "reward"], out_keys=["obs_n", "reward_n"]),
    )
    assert isinstance(env.observation_spec["obs_n"], Unbounded)
    assert "reward_n" in env.full_reward_spec.keys()
    assert env.transform._loc["observation"].shape == (3, 7)  # per sub-env statistics
    check_env_specs(env)


def test_vecnorm_v2_counts_reset_observations_but_not_missing_rewards():
    env = TransformedEnv(ContinuousActionVecMockEnv(), VecNormV2(in_keys=["observation", "reward"]))
    env.rollout(3)
    counts = env.transform._count
    assert counts["observation"].item() == 4 and counts["reward"].item() == 3


def test_vecnorm_v2_integer_observations_become_float():
    env = TransformedEnv(CountingEnv(), VecNormV2(in_keys=["observation"]))
    assert env.observation_spec["observation"].dtype == torch.get_default_dtype()
    check_env_specs(env)


def test_vecnorm_v2_stateless_carries_statistics_in_the_data():
    env = TransformedEnv(
        ContinuousActionVecMockEnv(), VecNormV2(in_keys=["observation", "reward"], stateful=False)
    )
    assert {"_vecnorm_loc", "_vecnorm_var", "_vecnorm_count"} <= set(env.observation_spec.keys())
    check_env_specs(env)
    rollout = env.rollout(3)
    counts = rollout["next", "_vecnorm_count", "observation"][:, 0].tolist()
    assert counts == [2, 3, 4]  # the reset's observation, then one per step
    assert env.transform.state_dict()["_extra_state"] == {}


def test_vecnorm_v2_frozen_statistics_do_not_move():
    t = VecNormV2(in_keys=["obs"], decay=1.0)
    _feed(t, torch.ones(2, 1))
    t.freeze()
    _feed(t, torch.full((2, 1), 5.0))
    assert t._count["obs"].item() == 1
    t.unfreeze()
    _feed(t, torch.ones(2, 1))
    assert t._count["obs"].item() == 2


def test_vecnorm_v2_frozen_copy_is_a_snapshot():
    t = VecNormV2(in_keys=["obs"], decay=1.0)
    _feed(t, torch.ones(1, 2))
    copy = t.frozen_copy()
    _feed(t, torch.full((1, 2), 3.0))
    assert copy.frozen and copy._count["obs"].item() == 1 and t._count["obs"].item() == 2


def test_vecnorm_v2_denorm_inverts_the_normalisation():
    t = VecNormV2(in_keys=["obs"], out_keys=["obs_n"], decay=0.9)
    x = torch.randn(4, 3)
    td = TensorDict(obs=x.clone(), batch_size=[4])
    t(TensorDict(obs=torch.randn(4, 3), batch_size=[4]))
    t.freeze()
    normed = t(td)
    restored = t.denorm(normed.exclude("obs"))
    torch.testing.assert_close(restored["obs"], x)


def test_vecnorm_v2_to_observation_norm_matches():
    t = VecNormV2(in_keys=["obs"], decay=0.99)
    _feed(t, torch.randn(1, 3), torch.randn(1, 3))
    t.freeze()
    x = torch.randn(1, 3)
    norm = t.to_observation_norm()
    assert isinstance(norm, ObservationNorm)
    torch.testing.assert_close(
        norm(TensorDict(obs=x.clone(), batch_size=[1]))["obs"], _feed(t, x)[0]
    )


def test_vecnorm_v2_state_dict_round_trip_copies_unshared_statistics():
    t = VecNormV2(in_keys=["obs"], decay=1.0)
    _feed(t, torch.ones(1, 2))
    other = VecNormV2(in_keys=["obs"], decay=1.0)
    other.load_state_dict(t.state_dict())
    _feed(other, torch.ones(1, 2))
    assert other._count["obs"].item() == 2 and t._count["obs"].item() == 1


def test_vecnorm_v2_loads_torchrl_flat_state():
    t = VecNormV2(in_keys=["obs"], decay=1.0)
    sep = ".-|-."
    state = {
        f"loc{sep}obs": torch.ones(2),
        f"var{sep}obs": torch.full((2,), 2.0),
        f"count{sep}obs": torch.tensor(3),
    }
    t.set_extra_state(state)
    assert t._count["obs"].item() == 3
    torch.testing.assert_close(t.scale["obs"], torch.ones(2))


@pytest.mark.parametrize("kind", ["serial", *PARALLEL])
def test_vecnorm_v2_statistics_shared_by_an_env_creator(kind):
    creator = EnvCreator(_normalised_env)
    local = creator()
    before = local.transform._count["observation"].item()
    if kind == "serial":
        env = rlbatched.SerialEnv(2, creator)
    else:
        env = rlbatched.ParallelEnv(2, creator, mp_start_method=kind)
    try:
        env.rollout(5)
    finally:
        env.close()
    # each sub-env: a reset and 5 steps, counted in the statistics this process holds
    assert local.transform._count["observation"].item() - before == 2 * 6


def test_vecnorm_v2_argument_errors():
    with pytest.raises(RuntimeError, match="reduce_batch_dims=True and stateful=False"):
        VecNormV2(in_keys=["obs"], stateful=False, reduce_batch_dims=True)
    with pytest.raises(NotImplementedError, match="shared_data is only supported with stateful"):
        VecNormV2(in_keys=["obs"], stateful=False, shared_data=TensorDict())


def test_vecnorm_v2_stateless_has_no_loc_or_denorm():
    t = VecNormV2(in_keys=["obs"], stateful=False)
    with pytest.raises(RuntimeError, match="loc cannot be computed with stateless vecnorm"):
        t.loc  # noqa: B018
    with pytest.raises(NotImplementedError, match="denorm is not implemented for stateless"):
        t.denorm(TensorDict())
    with pytest.raises(RuntimeError, match="Cannot create a frozen copy of a statelss VecNorm"):
        t.frozen_copy()


def test_vecnorm_v2_uninitialised_statistics():
    t = VecNormV2(in_keys=["obs"])
    with pytest.raises(RuntimeError, match="must be initialized before calling denorm"):
        t.denorm(TensorDict())
    with pytest.raises(RuntimeError, match="initialized before creating a frozen copy"):
        t.frozen_copy()


def test_vecnorm_v2_missing_entry_names_it():
    with pytest.raises(KeyError, match=r"\['obs'\] not found"):
        VecNormV2(in_keys=["obs"])(TensorDict(other=torch.zeros(1)))


def test_vecnorm_v2_standard_normal_is_always_true():
    assert VecNormV2(in_keys=["obs"]).standard_normal
    assert math.isclose(VecNormV2(in_keys=["obs"]).eps, 1e-4)
