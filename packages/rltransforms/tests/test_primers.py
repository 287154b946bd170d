"""TensorDictPrimer: specs or kwargs, random/default values, batch expansion, partial resets."""

from __future__ import annotations

import pytest
import torch
from _transform_b_envs import RandomDoneEnv
from _transform_envs import CountEnv, NestedDoneEnv
from tensordict import TensorDict
from torch import nn

from rlcore import check_env_specs
from rlspecs import Bounded, Categorical, Composite, Unbounded
from rltransforms import Compose, TensorDictPrimer, TransformedEnv

pytestmark = pytest.mark.filterwarnings("error")


def test_primer_single_trans_env_check():
    env = TransformedEnv(CountEnv(), TensorDictPrimer(mykey=Unbounded([3])))
    check_env_specs(env)
    assert "mykey" in env.reset().keys()
    assert ("next", "mykey") in env.rollout(3).keys(True)


@pytest.mark.parametrize("spec_shape", [[4], [2, 4]])
def test_primer_expands_to_the_env_batch(spec_shape):
    env = TransformedEnv(CountEnv((2,)), TensorDictPrimer(mykey=Unbounded(spec_shape)))
    check_env_specs(env)
    assert env.observation_spec["mykey"].shape == (2, 4)
    assert env.state_spec["mykey"].shape == (2, 4)
    rollout = env.rollout(3)
    assert rollout["next", "mykey"].shape == (2, 3, 4)


def test_primer_nested_keys():
    env = NestedDoneEnv()
    prior = env.observation_spec.clone()
    primer = TensorDictPrimer(
        Composite({"data": Composite({"mykey": Unbounded((2, 4))}, shape=(2,))}),
        reset_key=("data", "_reset"),
    )
    env = TransformedEnv(env, primer)
    check_env_specs(env)
    post = env.observation_spec.clone()
    assert ("data", "mykey") in post.keys(True, True)
    del post[("data", "mykey")]
    assert post == prior
    assert ("next", "data", "mykey") in env.rollout(3).keys(True, True)


def test_primer_transform_no_env_and_model():
    t = TensorDictPrimer(mykey=Unbounded([3]))
    td = TensorDict({"a": torch.zeros(())}, [])
    assert t(td) is td and td["mykey"].shape == (3,)
    model = nn.Sequential(TensorDictPrimer(mykey=Unbounded([3])), nn.Identity())
    assert "mykey" in model(TensorDict()).keys()


def test_primer_transform_compose():
    t = Compose(TensorDictPrimer(mykey=Unbounded([3])))
    td = TensorDict({"a": torch.zeros(())}, [])
    t(td)
    assert "mykey" in td.keys()


@pytest.mark.parametrize("spec_batch", [True, False])
def test_primer_transform_rb(spec_batch):
    """A replay-buffer sample ([B] or [B, T]) gets values of the right shape."""
    shape = [2, 3] if spec_batch else [3]
    t = TensorDictPrimer(mykey=Unbounded(shape), default_value=2.0)
    sample = TensorDict({"a": torch.zeros(2)}, [2])
    assert t(sample)["mykey"].shape == (2, 3) and (sample["mykey"] == 2).all()
    sample = TensorDict({"a": torch.zeros(2, 5)}, [2, 5])
    if spec_batch:
        assert t(sample)["mykey"].shape == (2, 5, 2, 3)
    else:
        assert t(sample)["mykey"].shape == (2, 5, 3)


def test_primer_transform_inverse_is_identity():
    t = TensorDictPrimer(mykey=Unbounded([3]))
    td = TensorDict({"a": torch.zeros(())}, [])
    assert set(t.inv(td).keys()) == {"a"} and not t.has_inverse


@pytest.mark.parametrize("random", [True, False])
@pytest.mark.parametrize("value", [0.0, 1.0])
@pytest.mark.parametrize("batch", [(), (2,)])
def test_primer_transform_env(value, random, batch):
    kwargs = {"mykey": Bounded(-1, 1, shape=(3,))}
    if random:
        kwargs["random"] = True
    else:
        kwargs["default_value"] = value
    env = TransformedEnv(CountEnv(batch), TensorDictPrimer(**kwargs))
    assert env.observation_spec["mykey"].shape == (*batch, 3)
    td = env.reset()
    if random:
        assert (td["mykey"].abs() <= 1).all()
    else:
        assert (td["mykey"] == value).all()
    td = env.rand_step(td)
    assert (td["next", "mykey"] == td["mykey"]).all()  # carried from step to step


def test_primer_value_preset_under_next_is_kept():
    env = TransformedEnv(CountEnv((2,)), TensorDictPrimer(mykey=Unbounded([2, 3])))
    td = env.reset()
    td.set(("next", "mykey"), torch.ones(2, 3))
    td = env.rand_step(td)
    assert (td["next", "mykey"] == 1).all()


def test_primer_partial_reset_only_draws_for_restarting_envs():
    env = TransformedEnv(
        RandomDoneEnv((4,), p_done=0.4), TensorDictPrimer(h=Unbounded(2), random=True)
    )
    rollout = env.rollout(25, break_when_any_done=False)
    done = rollout["next", "done"].squeeze(-1)[:, :-1]
    h, next_h = rollout["h"][:, 1:], rollout["next", "h"][:, :-1]
    changed = (h != next_h).any(-1)
    assert done.any() and (~done).any()
    assert (changed == done).all()  # new values exactly where an episode restarted


def test_primer_reset_without_flags_redraws_everything():
    t = TensorDictPrimer(h=Unbounded(2), random=True, reset_key="_reset")
    td = TensorDict(h=torch.zeros(3, 2), batch_size=[3])
    out = t._reset(td, td.empty())
    assert (out["h"] != 0).all()
    out = t._reset(td.set("_reset", torch.zeros(3, 1, dtype=torch.bool)), td.empty())
    assert "h" not in out.keys()  # nothing to reset


def test_primer_callable_default_value():
    env = TransformedEnv(
        CountEnv(), TensorDictPrimer(mykey=Unbounded([3]), default_value=lambda: torch.ones(3))
    )
    check_env_specs(env)
    assert (env.rollout(3)["next", "mykey"] == 1).all()


def test_primer_dict_default_value():
    env = TransformedEnv(
        CountEnv(),
        TensorDictPrimer(
            mykey1=Unbounded([3]),
            mykey2=Unbounded([3]),
            default_value={"mykey1": 1.0, "mykey2": 2.0},
        ),
    )
    check_env_specs(env)
    rollout = env.rollout(3)
    assert (rollout["next", "mykey1"] == 1).all() and (rollout["next", "mykey2"] == 2).all()
    env = TransformedEnv(
        CountEnv(),
        TensorDictPrimer(
            mykey1=Unbounded([3]),
            mykey2=Categorical(3, shape=[3], dtype=torch.int64),
            default_value={
                "mykey1": lambda: torch.ones(3),
                "mykey2": lambda: torch.tensor([1, 2, 0], dtype=torch.int64),
            },
        ),
    )
    check_env_specs(env)
    rollout = env.rollout(3)
    assert (rollout["next", "mykey2"] == torch.tensor([1, 2, 0])).all()
    assert rollout["next", "mykey2"].dtype == torch.int64


def test_primer_default_dtype_follows_the_spec():
    env = TransformedEnv(
        CountEnv(),
        TensorDictPrimer(k=Categorical(4, shape=[2], dtype=torch.int64), default_value=3),
    )
    check_env_specs(env)
    assert env.reset()["k"].dtype == torch.int64


def test_primer_errors():
    with pytest.raises(ValueError, match="incompatible"):
        TensorDictPrimer(k=Unbounded(1), random=True, default_value=1.0)
    with pytest.raises(ValueError, match="must match the primers keys"):
        TensorDictPrimer(k=Unbounded(1), default_value={"other": 1.0})
    with pytest.raises(ValueError, match="subtype of the TensorSpec class"):
        TensorDictPrimer(k=torch.zeros(1))
    with pytest.raises(RuntimeError, match="incompatible with extra keys"):
        TensorDictPrimer({"k": Unbounded(1)}, other=Unbounded(1))
    env = TransformedEnv(
        CountEnv(),
        TensorDictPrimer(k=Bounded(0, 1, (2,)), default_value=lambda: torch.full((2,), 5.0)),
    )
    with pytest.raises(RuntimeError, match="not in its spec"):
        env.reset()
    env = TransformedEnv(CountEnv(), TensorDictPrimer(k=Unbounded(2)))
    td = env.reset().exclude("k")
    td.set("action", torch.zeros(1))
    with pytest.raises(KeyError, match="reset the env first"):
        env.step(td)
