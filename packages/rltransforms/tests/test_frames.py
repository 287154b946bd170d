"""CatFrames and TimeMaxPool: in an env (partial resets), standalone, offline on [B, T] data."""

from __future__ import annotations

import re

import pytest
import torch
from _transform_b_envs import RandomDoneEnv
from _transform_envs import CountEnv
from tensordict import TensorDict
from torch import nn

from rlcore import check_env_specs
from rlspecs import Bounded, Composite
from rltransforms import CatFrames, Compose, TimeMaxPool, TransformedEnv
from rltransforms._frames import (
    AS_INVERSE_ENV_ERROR,
    NO_DONE_ERROR,
    TIME_MAX_POOL_FORWARD_ERROR,
    UNBATCHED_ERROR,
)

pytestmark = pytest.mark.filterwarnings("error")


# ---------------------------------------------------------------------------- CatFrames
@pytest.mark.parametrize("out_keys", [None, ["obs2"]])
@pytest.mark.parametrize("batch", [(), (3,)])
def test_catframes_single_trans_env_check(out_keys, batch):
    env = TransformedEnv(
        RandomDoneEnv(batch), CatFrames(dim=-1, N=3, in_keys=["observation"], out_keys=out_keys)
    )
    check_env_specs(env)
    key = "observation" if out_keys is None else "obs2"
    assert env.observation_spec[key].shape == (*batch, 9)


@pytest.mark.parametrize("padding", ["same", "constant"])
def test_catframes_env_frames_and_padding(padding):
    env = TransformedEnv(
        CountEnv(), CatFrames(N=3, dim=-1, in_keys=["observation"], padding=padding)
    )
    rollout = env.rollout(3)
    first = rollout["observation"][0]
    if padding == "same":
        assert (first == 0).all()  # three copies of the reset frame (count 0)
    else:
        assert (first[:6] == 0).all() and (first[6:] == 0).all()
    # after step t the stack is [t-1, t, t+1] (clamped at the episode start)
    expected_last = torch.tensor([1.0, 2.0, 3.0]).repeat_interleave(3)
    torch.testing.assert_close(rollout["next", "observation"][-1], expected_last)


def test_catframes_constant_padding_value():
    env = TransformedEnv(
        CountEnv(),
        CatFrames(N=3, dim=-1, in_keys=["observation"], padding="constant", padding_value=-1),
    )
    td = env.reset()
    assert (td["observation"][:6] == -1).all() and (td["observation"][6:] == 0).all()


def test_catframes_partial_reset_only_refills_restarting_envs():
    t = CatFrames(N=2, dim=-1, in_keys=["obs"])
    td = TensorDict(obs=torch.tensor([[1.0], [2.0]]), batch_size=[2])
    t._reset(td, td.clone())  # buffers [1, 1] and [2, 2]
    t._call(TensorDict(obs=torch.tensor([[3.0], [4.0]]), batch_size=[2]))  # [1, 3], [2, 4]
    reset_in = TensorDict(_reset=torch.tensor([[True], [False]]), batch_size=[2])
    out = t._reset(reset_in, TensorDict(obs=torch.tensor([[5.0], [4.0]]), batch_size=[2]))
    torch.testing.assert_close(out["obs"], torch.tensor([[5.0, 5.0], [2.0, 4.0]]))


@pytest.mark.parametrize("dim", [-3, -2, 1])
@pytest.mark.parametrize("batch_size", [(), (1,), (1, 2)])
@pytest.mark.parametrize("d", [1, 3])
@pytest.mark.parametrize("N", [2, 4])
def test_catframes_transform_no_env(dim, batch_size, d, N):
    keys = ["first key", ("second", "key")]
    extra = (3,) * (-dim - 1)
    td = TensorDict(
        {
            keys[0]: torch.ones(*batch_size, d, *extra) * 2,
            keys[1]: torch.ones(*batch_size, d, *extra),
        },
        batch_size,
    )
    if dim > 0:
        with pytest.raises(ValueError, match="dim must be < 0 to accomodate for tensordict"):
            CatFrames(N=N, in_keys=keys, dim=dim)
        return
    cat = CatFrames(N=N, in_keys=keys, dim=dim)
    latest = cat._call(td.clone()).get(keys[1])
    assert latest.shape[dim] == N * d
    slices = (slice(None),) * (-dim - 1)
    assert (latest[(Ellipsis, slice(None, -d), *slices)] == 0).all()
    assert (latest[(Ellipsis, slice(-d, None), *slices)] == 1).all()
    latest2 = cat._call(td.clone()).get(keys[1])
    assert (latest2[(Ellipsis, slice(None, -2 * d), *slices)] == 0).all()
    assert (latest2[(Ellipsis, slice(-2 * d, None), *slices)] == 1).all()
    assert latest2 is not latest


@pytest.mark.parametrize("N", [2, 4])
def test_catframes_transform_compose(N):
    keys = ["first key", "second key"]
    td = TensorDict({k: torch.ones(2, 3) for k in keys}, [2])
    compose = Compose(CatFrames(N=N, in_keys=keys, dim=-1))
    out = compose._call(td.clone())
    assert out["second key"].shape == (2, 3 * N)
    assert (out["second key"][:, -3:] == 1).all() and (out["second key"][:, :-3] == 0).all()


@pytest.mark.parametrize("batch_size", [(), (1,), (1, 2)])
def test_catframes_reset_refills_buffers(batch_size):
    keys = ["first key", "second key"]
    td = TensorDict({k: torch.randn(*batch_size, 2, 3, 3) for k in keys}, batch_size)
    cat = CatFrames(N=3, in_keys=keys, dim=-3, reset_key="_reset")
    cat._call(td.clone())
    buffer = getattr(cat, "_cat_buffers_first key")
    assert (buffer[..., :4, :, :] == 0).all()
    tdc = td.clone()
    assert cat._reset(tdc, tdc) is tdc
    assert (buffer != 0).all()  # "same" padding: the reset frame, three times
    torch.testing.assert_close(buffer, torch.cat([td["first key"]] * 3, -3))


def test_catframes_transform_observation_spec():
    keys = ["first key", "second key"]
    cat = CatFrames(N=4, in_keys=keys, dim=-3)
    spec = Composite(
        {
            key: Bounded(low, high, (1, 3, 3), dtype=torch.double)
            for key, low, high in zip(keys, [0, 0.5], [0.5, 1])
        }
    )
    result = cat.transform_observation_spec(spec.clone())
    assert result["second key"].shape == (4, 3, 3)
    for key in keys:
        for i in range(4):
            torch.testing.assert_close(result[key].space.high[i], spec[key].space.high[0])
            torch.testing.assert_close(result[key].space.low[i], spec[key].space.low[0])


@pytest.mark.parametrize("padding", ["same", "constant"])
@pytest.mark.parametrize("N", [3, 4])
def test_catframes_transform_model(padding, N):
    """Online frames (in an env) and offline frames (a module on the rollout) agree."""
    cat = CatFrames(N=N, in_keys=["observation"], out_keys=["out"], dim=-1, padding=padding)
    cat2 = CatFrames(
        N=N,
        in_keys=["observation", ("next", "observation")],
        out_keys=["out", ("next", "out")],
        dim=-1,
        padding=padding,
    )
    rollout = TransformedEnv(RandomDoneEnv(), cat).rollout(10, break_when_any_done=False)
    model = nn.Sequential(cat2, nn.Identity())
    rebuilt = model(rollout.exclude("out", ("next", "out")))
    assert (rebuilt == rollout).all()


@pytest.mark.parametrize("padding", ["same", "constant"])
@pytest.mark.parametrize("key,dim", [("observation", -1), ("pixels", -3)])
def test_catframes_transform_rb(padding, key, dim):
    """[B, T] data with partial resets (as a replay buffer holds it) give the online frames."""
    env = TransformedEnv(
        RandomDoneEnv((3,), p_done=0.3),
        CatFrames(N=4, dim=dim, in_keys=[key], out_keys=["cat"], padding=padding),
    )
    rollout = env.rollout(30, break_when_any_done=False)
    assert rollout["next", "done"].sum() > 3  # episodes end in the middle of the batch
    offline = CatFrames(
        N=4,
        dim=dim,
        in_keys=[key, ("next", key)],
        out_keys=["cat2", ("next", "cat2")],
        padding=padding,
    )
    data = offline(rollout.clone())
    assert (data["cat2"] == rollout["cat"]).all()
    assert (data["next", "cat2"] == rollout["next", "cat"]).all()


def test_catframes_offline_time_dim_first_and_warning():
    rollout = TransformedEnv(
        RandomDoneEnv((2,)), CatFrames(N=3, dim=-1, in_keys=["observation"], out_keys=["cat"])
    ).rollout(8, break_when_any_done=False)
    offline = CatFrames(N=3, dim=-1, in_keys=["observation"], out_keys=["cat2"])
    transposed = rollout.transpose(0, 1).contiguous()  # [T, B], "time" first
    assert transposed.names[0] == "time"
    out = offline(transposed)
    assert (out["cat2"] == transposed["cat"]).all()
    unnamed = rollout.clone()
    unnamed.names = [None, None]
    with pytest.warns(UserWarning, match="should be marked as 'time'"):
        out = offline(unnamed)
    assert (out["cat2"] == rollout["cat"]).all()


def test_catframes_offline_errors():
    cat = CatFrames(N=2, dim=-1, in_keys=["obs"])
    with pytest.raises(ValueError, match="unbatched"):
        cat(TensorDict(obs=torch.zeros(3)))
    with pytest.raises(KeyError, match=re.escape(NO_DONE_ERROR.format(key=("next", "done"))[:30])):
        cat(TensorDict(obs=torch.zeros(4, 3), batch_size=[4], names=["time"]))
    assert "unbatched" in UNBATCHED_ERROR


@pytest.mark.parametrize("padding", ["same", "constant"])
def test_catframes_transform_inverse(padding):
    """`as_inverse`: the stacking runs in inv (for stored data) and the env refuses it."""
    keys = ["observation", ("next", "observation")]
    cat = CatFrames(N=3, in_keys=keys, dim=-1, padding=padding, as_inverse=True)
    rollout = TransformedEnv(RandomDoneEnv()).rollout(10, break_when_any_done=False)
    assert cat(rollout.clone())["observation"].shape == (10, 3)  # forward: identity
    out = cat.inv(rollout)
    assert out["observation"].shape == (10, 9) and out["next", "observation"].shape == (10, 9)
    assert rollout["observation"].shape == (10, 3)  # inv works on a copy
    expected = CatFrames(N=3, in_keys=keys, dim=-1, padding=padding)(rollout.clone())
    assert (out == expected).all()
    env = TransformedEnv(
        RandomDoneEnv(), CatFrames(N=3, in_keys=keys, dim=-1, padding=padding, as_inverse=True)
    )
    with pytest.raises(RuntimeError, match=AS_INVERSE_ENV_ERROR):
        env.rollout(3)


def test_catframes_bad_arguments():
    with pytest.raises(ValueError, match="padding must be one of"):
        CatFrames(N=2, dim=-1, padding="reflect")
    with pytest.raises(RuntimeError, match="deprecated"):
        CatFrames(N=2, dim=-1, padding="zeros")
    with pytest.raises(ValueError, match="N must be a positive integer"):
        CatFrames(N=0, dim=-1)
    cat = CatFrames(N=2, dim=-3, in_keys=["obs"])
    with pytest.raises(ValueError, match="not a feature dim"):
        cat._call(TensorDict(obs=torch.zeros(4, 3), batch_size=[4]))
    cat = CatFrames(N=2, dim=-1, in_keys=["obs"])
    cat._call(TensorDict(obs=torch.zeros(3)))
    with pytest.raises(ValueError, match="buffer was built for shape"):
        cat._call(TensorDict(obs=torch.zeros(4)))
    with pytest.raises(KeyError, match="'obs' not found"):
        cat._call(TensorDict(other=torch.zeros(3)))


def test_catframes_reset_key_follows_a_nested_done():
    from _transform_envs import NestedDoneEnv

    env = TransformedEnv(NestedDoneEnv(), CatFrames(N=2, dim=-1, in_keys=[("data", "observation")]))
    env.transform.reset_key = None
    # NestedDoneEnv has one reset key (under "data"): it is picked up
    assert env.transform.reset_key == ("data", "_reset")
    check_env_specs(env)


# ---------------------------------------------------------------------------- TimeMaxPool
def test_timemaxpool_single_trans_env_check():
    env = TransformedEnv(RandomDoneEnv((2,)), TimeMaxPool(in_keys=["observation"], T=3))
    check_env_specs(env)
    env = TransformedEnv(
        RandomDoneEnv(), TimeMaxPool(in_keys=["observation"], out_keys=["pooled"], T=3)
    )
    check_env_specs(env)
    assert "pooled" in env.observation_spec.keys()


@pytest.mark.parametrize("T", [2, 4])
def test_timemaxpool_transform_no_env(T):
    pool = TimeMaxPool(["observation"], T=T)
    values = [torch.rand(1, 4) for _ in range(8)]
    for value in values:
        out = pool._call(TensorDict(observation=value))
    expected = torch.stack(values[-T:]).max(0).values
    assert (out["observation"] == expected).all()


@pytest.mark.parametrize("T", [2, 4])
def test_timemaxpool_transform_compose(T):
    pool = Compose(TimeMaxPool(["observation"], T=T))
    values = [torch.rand(1, 4) for _ in range(8)]
    for value in values:
        out = pool._call(TensorDict(observation=value))
    assert (out["observation"] == torch.stack(values[-T:]).max(0).values).all()


def test_timemaxpool_transform_env_pools_within_episodes():
    env = TransformedEnv(RandomDoneEnv((3,)), TimeMaxPool(out_keys=["pooled"], T=3))
    rollout = env.rollout(20, break_when_any_done=False)
    obs, pooled = rollout["next", "observation"], rollout["next", "pooled"]
    root_obs = rollout["observation"]
    done = rollout["next", "done"].squeeze(-1)
    for b in range(3):
        start, history = 0, [root_obs[b, 0]]
        for t in range(20):
            history.append(obs[b, t])
            expected = torch.stack(history[-3:]).max(0).values
            torch.testing.assert_close(pooled[b, t], expected)
            if done[b, t]:
                history = [root_obs[b, t + 1]] if t + 1 < 20 else []
                start = t + 1
        assert start >= 0


def test_timemaxpool_reset_copies_missing_entries_and_errors():
    pool = TimeMaxPool(in_keys="first key", T=3, reset_key="_reset")
    td = TensorDict({"first key": torch.randn(1, 3)}, [1])
    pool._call(td.clone())
    out = pool._reset(td, td.empty())
    assert (out["first key"] == td["first key"]).all()
    with pytest.raises(KeyError, match="neither the reset output nor the reset input"):
        pool._reset(td.empty(), td.empty())
    with pytest.raises(ValueError, match="greater or equal to one"):
        TimeMaxPool(T=0)


def test_timemaxpool_transform_model_and_rb_refuse():
    pool = TimeMaxPool(in_keys=["observation"], T=3)
    with pytest.raises(NotImplementedError, match="TimeMaxPool cannot be called independently"):
        nn.Sequential(pool, nn.Identity())(
            TensorDict(observation=torch.zeros(5, 3), batch_size=[5])
        )
    with pytest.raises(NotImplementedError, match=TIME_MAX_POOL_FORWARD_ERROR[:40]):
        pool(TensorDict(observation=torch.zeros(10, 4, 3), batch_size=[10, 4]))


def test_timemaxpool_transform_inverse_is_identity():
    pool = TimeMaxPool(in_keys=["observation"], T=3)
    td = TensorDict(observation=torch.ones(3))
    assert (pool.inv(td) == td).all() and not pool.has_inverse
