"""TransformedEnv, Transform and Compose: wiring, spec caching, inverse transforms, ordering."""

from __future__ import annotations

import pickle
import re

import pytest
import torch
from _transform_envs import CountEnv, DoubleEnv
from tensordict import TensorDict

from rlcore import EnvBase, check_env_specs
from rlspecs import Bounded, Composite, Unbounded
from rltransforms import (
    Compose,
    DoubleToFloat,
    InitTracker,
    RewardSum,
    StepCounter,
    Transform,
    TransformedEnv,
)
from rltransforms._base import (
    MISSING_KEY_ERROR,
    NOT_A_TRANSFORM_ERROR,
    PARENT_SET_ERROR,
    UNREGISTERED_KEY_ERROR,
)
from rltransforms._compose import INSERT_INDEX_ERROR

pytestmark = pytest.mark.filterwarnings("error")


class AddOne(Transform):
    """Adds 1 to its in_keys (reset outputs included); subtracts 1 on the way in."""

    _call_on_reset = True

    def _apply_transform(self, obs):
        return obs + 1

    def _inv_apply_transform(self, state):
        return state - 1


class Times(Transform):
    """Multiplies its in_keys by `factor` (reset outputs included); divides on the way in."""

    _call_on_reset = True

    def __init__(self, factor, **kwargs):
        super().__init__(**kwargs)
        self.factor = factor

    def _apply_transform(self, obs):
        return obs * self.factor

    def _inv_apply_transform(self, state):
        return state / self.factor


class Recorder(CountEnv):
    """CountEnv that records the action it receives."""

    def _step(self, tensordict):
        self.received = tensordict.get("action").clone()
        return super()._step(tensordict)


def test_transformed_env_without_transform_behaves_like_base_env():
    env = TransformedEnv(CountEnv(batch_size=(2,)))
    assert isinstance(env.transform, Compose) and len(env.transform) == 0
    assert env.output_spec == env.base_env.output_spec
    assert env.input_spec == env.base_env.input_spec
    assert env.batch_size == torch.Size([2])
    check_env_specs(env)
    rollout = env.rollout(4)
    assert rollout.shape == (2, 4)
    assert (rollout["next", "observation"][0, :, 0] == torch.arange(1.0, 5.0)).all()


def test_env_is_torchrl_040s_name_of_base_env():
    base = CountEnv()
    env = TransformedEnv(env=base, transform=StepCounter())
    assert env.base_env is base and "step_count" in env.observation_spec.keys()
    for kwargs in ({}, {"base_env": base, "env": base}):
        with pytest.raises(TypeError, match="exactly one of them"):
            TransformedEnv(**kwargs)


def test_unknown_attributes_are_forwarded_to_the_base_env():
    env = TransformedEnv(CountEnv(), StepCounter())
    assert env.custom_method() == "base"
    assert env.max_count == 1000
    with pytest.raises(AttributeError):
        env.does_not_exist  # noqa: B018


def test_batch_locked_and_device_mirror_the_base_env():
    base = CountEnv(batch_size=(3,))
    base._batch_locked = False
    env = TransformedEnv(base)
    assert env.batch_locked is False
    assert TransformedEnv(CountEnv()).batch_locked is True
    assert env.device == base.device


def test_set_seed_and_close_are_forwarded():
    base = CountEnv()
    env = TransformedEnv(base, StepCounter())
    env.set_seed(3)
    assert base.seed_calls == [3]
    env.close()
    assert base.is_closed and env.is_closed


def test_non_transform_is_rejected():
    with pytest.raises(
        ValueError,
        match=re.escape(NOT_A_TRANSFORM_ERROR.format(where="TransformedEnv", type="int")),
    ):
        TransformedEnv(CountEnv(), 3)


def test_specs_are_transformed_once_not_per_step(monkeypatch):
    env = TransformedEnv(CountEnv(), Compose(StepCounter(5), RewardSum()))
    calls = []
    original = Compose.transform_output_spec

    def counting(self, spec):
        calls.append(1)
        return original(self, spec)

    monkeypatch.setattr(Compose, "transform_output_spec", counting)
    env.rollout(20, break_when_any_done=False)
    assert calls == []


def test_append_and_insert_transform_rebuild_the_specs():
    env = TransformedEnv(CountEnv(), AddOne(in_keys=["observation"]))
    assert "step_count" not in env.observation_spec.keys()
    env.append_transform(StepCounter())
    assert "step_count" in env.observation_spec.keys()
    assert isinstance(env.transform, Compose) and len(env.transform) == 2
    env.insert_transform(0, RewardSum())
    assert "episode_reward" in env.observation_spec.keys()
    assert [type(t).__name__ for t in env.transform] == ["RewardSum", "AddOne", "StepCounter"]
    check_env_specs(env)


def test_compose_append_on_an_attached_compose_rebuilds_the_specs():
    env = TransformedEnv(CountEnv(), Compose())
    env.transform.append(StepCounter())
    assert "step_count" in env.observation_spec.keys()


def test_wrapping_a_transformed_env_unwraps_it():
    inner = TransformedEnv(CountEnv(), StepCounter())
    outer = TransformedEnv(inner, RewardSum(), auto_unwrap=True)
    assert isinstance(outer.base_env, CountEnv)
    assert [type(t).__name__ for t in outer.transform] == ["StepCounter", "RewardSum"]
    check_env_specs(outer)
    kept = TransformedEnv(inner, RewardSum(), auto_unwrap=False)
    assert kept.base_env is inner


def test_outputs_go_through_the_transform_and_inputs_through_its_inverse():
    base = Recorder()
    env = TransformedEnv(base, AddOne(in_keys=["observation"], in_keys_inv=["action"]))
    td = env.reset()
    assert (td["observation"] == 1).all()
    td["action"] = torch.full((1,), 5.0)
    out = env.step(td)
    assert base.received.item() == 4.0
    assert out["action"].item() == 5.0  # the caller's action is untouched
    assert (out["next", "observation"] == 2).all()


def test_compose_applies_in_order_and_inverts_in_reverse_order():
    base = Recorder()
    compose = Compose(
        AddOne(in_keys=["observation"], in_keys_inv=["action"]),
        Times(10.0, in_keys=["observation"], in_keys_inv=["action"]),
    )
    env = TransformedEnv(base, compose)
    td = env.reset()
    assert (td["observation"] == 10).all()  # (0 + 1) * 10
    td["action"] = torch.full((1,), 50.0)
    env.step(td)
    assert base.received.item() == 4.0  # 50 / 10 - 1


def test_missing_in_key_names_the_key():
    env = TransformedEnv(CountEnv(), AddOne(in_keys=["obs_typo"], out_keys=["observation"]))
    td = env.reset()
    td["action"] = torch.zeros(1)
    message = MISSING_KEY_ERROR.format(cls="AddOne", key="obs_typo", keys="")
    with pytest.raises(KeyError, match=re.escape(message.split(" (keys")[0])):
        env.step(td)


def test_missing_tolerance_skips_missing_keys():
    transform = AddOne(in_keys=["absent"])
    transform.set_missing_tolerance(True)
    td = transform(TensorDict(a=torch.zeros(1)))
    assert set(td.keys()) == {"a"}


def test_unregistered_out_key_is_reported():
    with pytest.raises(KeyError, match=re.escape("AddOne writes 'new'")):
        TransformedEnv(CountEnv(), AddOne(in_keys=["observation"], out_keys=["new"]))
    assert "writes {key!r}" in UNREGISTERED_KEY_ERROR


def test_a_transform_has_one_container():
    transform = StepCounter()
    env = TransformedEnv(CountEnv(), transform)
    assert transform.container is env
    with pytest.raises(AttributeError, match=re.escape(PARENT_SET_ERROR.format(cls="StepCounter"))):
        TransformedEnv(CountEnv(), transform)
    clone = transform.clone()
    assert clone.container is None
    TransformedEnv(CountEnv(), clone)


def test_parent_is_the_base_env_plus_previous_transforms():
    compose = Compose(StepCounter(), RewardSum(), AddOne(in_keys=["observation"]))
    env = TransformedEnv(CountEnv(), compose)
    assert compose[0].container is env
    parent = compose[2].parent
    assert isinstance(parent, TransformedEnv)
    assert isinstance(parent.base_env, CountEnv)
    assert {"step_count", "episode_reward"} <= set(parent.observation_spec.keys())
    assert "step_count" not in compose[0].parent.observation_spec.keys()
    assert StepCounter().parent is None


def test_double_to_float_inverse_feeds_the_base_env_float64():
    base = DoubleEnv()
    env = TransformedEnv(base, DoubleToFloat(in_keys=["obs_a", "obs_b"], in_keys_inv=["action"]))
    assert env.action_spec.dtype == torch.float32
    assert env.observation_spec["obs_a"].dtype == torch.float32
    check_env_specs(env)
    assert base.last_action_dtype == torch.float64


def test_state_dict_holds_the_transform_state():
    env = TransformedEnv(CountEnv(), Times(2.0, in_keys=["observation"]))
    assert isinstance(env.state_dict(), dict)


def test_forward_applies_the_transform_outside_an_env():
    td = AddOne(in_keys=["x"], out_keys=["y"])(TensorDict(x=torch.zeros(2)))
    assert (td["y"] == 1).all() and (td["x"] == 0).all()


def test_inv_works_on_a_copy():
    td = TensorDict(action=torch.ones(1))
    out = AddOne(in_keys_inv=["action"]).inv(td)
    assert out["action"].item() == 0.0 and td["action"].item() == 1.0


def test_to_moves_specs_and_rebuilds_them():
    env = TransformedEnv(CountEnv(), StepCounter())
    moved = env.to("cpu")
    assert moved is env
    assert env.observation_spec["step_count"].device == torch.device("cpu")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA required")
def test_to_cuda_moves_base_env_transform_and_specs():
    env = TransformedEnv(CountEnv(), StepCounter(3)).to("cuda")
    assert env.device.type == "cuda"
    assert env.observation_spec["step_count"].device.type == "cuda"
    assert env.rollout(5, break_when_any_done=False).device.type == "cuda"


def test_a_pickled_transformed_env_keeps_its_wiring():
    env = TransformedEnv(CountEnv(), Compose(StepCounter(2), RewardSum()))
    copy = pickle.loads(pickle.dumps(env))
    assert copy.transform.container is copy
    assert copy.transform[0].container is copy
    rollout = copy.rollout(4, break_when_any_done=False)
    assert rollout["next", "step_count"].squeeze(-1).tolist() == [1, 2, 1, 2]
    copy.append_transform(InitTracker())
    assert "is_init" in copy.observation_spec.keys()


# ------------------------------------------------------ standalone use, torchrl 0.4 hooks
def test_spec_methods_accept_a_single_leaf_spec():
    spec = Unbounded((3,))
    out = Times(2.0, in_keys=["observation"]).transform_observation_spec(spec)
    assert out is spec  # Times keeps the spec: a leaf goes through the per-key map unchanged
    t = DoubleToFloat(in_keys=["observation"], in_keys_inv=[])
    assert t.transform_observation_spec(Bounded(0, 1, (3,), dtype=torch.float64)).dtype == (
        torch.float32
    )


def test_forward_accepts_keyword_tensors_named_after_the_in_keys():
    out = AddOne(in_keys=["observation"])(observation=torch.zeros(2))
    assert (out == 1).all()  # the out_keys' values come back, as with tensordict.nn modules


def test_reset_runs_the_reset_hook_on_the_given_tensordict():
    td = AddOne(in_keys=["observation"]).reset(TensorDict(observation=torch.zeros(1)))
    assert td["observation"].item() == 1.0


def test_transforms_work_inside_nn_sequential():
    model = torch.nn.Sequential(AddOne(in_keys=["x"]), Times(3.0, in_keys=["x"]))
    assert model(TensorDict(x=torch.zeros(1)))["x"].item() == 3.0


def test_compose_takes_callables_and_calls_members_forward():
    def add_key(td):
        return td.set("seen", torch.ones(1))

    compose = Compose(AddOne(in_keys=["x"]), add_key)
    td = compose(TensorDict(x=torch.zeros(1)))
    assert td["x"].item() == 1.0 and "seen" in td.keys()
    with pytest.raises(ValueError, match="Compose expected a Transform or a callable"):
        Compose(3)


def test_compose_append_flattens_a_plain_compose_and_insert_checks_the_index():
    compose = Compose(AddOne(in_keys=["x"]))
    compose.append(Compose(Times(2.0, in_keys=["x"]), Times(3.0, in_keys=["x"])))
    assert [type(t).__name__ for t in compose] == ["AddOne", "Times", "Times"]
    assert all(t.container_ref is compose for t in compose)
    with pytest.raises(ValueError, match=re.escape(INSERT_INDEX_ERROR.format(n=3, index=5))):
        compose.insert(5, AddOne(in_keys=["x"]))
    compose.insert(-1, AddOne(in_keys=["y"]))
    assert compose[2].in_keys == ["y"]


def test_compose_slices_are_copies_without_container():
    env = TransformedEnv(CountEnv(), Compose(StepCounter(), RewardSum(), InitTracker()))
    part = env.transform[1:]
    assert isinstance(part, Compose) and len(part) == 2
    assert part[0] is not env.transform[1] and part.container is None
    assert [type(t).__name__ for t in env.transform[[0, 2]]] == ["StepCounter", "InitTracker"]


def test_transformed_env_accepts_a_callable_and_a_new_transform():
    def double(td):
        return td.set("observation", td["observation"] * 2)

    env = TransformedEnv(CountEnv(), double)
    env.rollout(2)
    assert env.rollout(2)["next", "observation"][-1, 0].item() == 4.0
    env.transform = StepCounter()
    assert "step_count" in env.observation_spec.keys()
    env.append_transform(lambda td: td)
    assert len(env.transform) == 2


class ToMeta(Transform):
    """Claims the env lives on another device and has another batch size (spec-level only)."""

    def transform_env_device(self, device):
        return torch.device("meta")

    def transform_env_batch_size(self, batch_size):
        return torch.Size([*batch_size])


def test_env_device_and_batch_size_go_through_the_transform():
    env = TransformedEnv(CountEnv(batch_size=(2,)), ToMeta())
    assert env.device == torch.device("meta")
    assert env.batch_size == (2,)


def test_eval_and_train_switch_the_transform_mode():
    env = TransformedEnv(CountEnv(), AddOne(in_keys=["observation"]))
    assert env.train() is env and env.transform.training
    assert env.eval() is env and not env.transform.training


def test_env_base_accepts_a_dtype_argument_as_older_envs_pass_it():
    class OldStyleEnv(CountEnv):
        def __init__(self):
            EnvBase.__init__(self, device="cpu", dtype=torch.float64, batch_size=torch.Size([]))

    env = OldStyleEnv()
    assert env.dtype == torch.float64 and env.device == torch.device("cpu")


def test_env_append_transform_gives_a_transformed_env():
    base = CountEnv()
    env = base.append_transform(StepCounter())
    assert isinstance(env, TransformedEnv) and env.base_env is base
    assert env.append_transform(RewardSum()) is env  # a TransformedEnv grows in place
    assert [type(t).__name__ for t in env.transform] == ["StepCounter", "RewardSum"]


def test_input_spec_with_a_none_state_group_is_accepted():
    spec = Composite(full_action_spec=Composite(action=Unbounded(2)), full_state_spec=None)
    out = StepCounter().transform_input_spec(spec)
    assert out["full_state_spec", "step_count"].dtype == torch.int64
    out = DoubleToFloat(in_keys_inv=[]).transform_input_spec(spec.clone())
    assert "action" in out["full_action_spec"].keys()


def test_a_lone_transform_keeps_its_parent_when_the_env_wraps_it_in_a_compose():
    transform = AddOne(in_keys=["observation"])
    env = TransformedEnv(CountEnv(), transform)
    first = transform.parent
    assert first is transform.parent  # cached
    assert isinstance(first.transform, Compose) and len(first.transform) == 0
    env.insert_transform(0, StepCounter())
    assert transform.container is env
    parent = transform.parent
    assert parent is not first and type(parent.transform[0]) is StepCounter


def test_positive_dims_without_env_count_from_the_first_dim():
    # torchrl 0.4: without parent env a positive dim is used as given, whatever the batch size
    from rltransforms import UnsqueezeTransform

    t = UnsqueezeTransform(1, allow_positive_dim=True, in_keys=["x"])
    assert t(TensorDict(x=torch.zeros(2, 3, 4), batch_size=[2]))["x"].shape == (2, 1, 3, 4)
    assert t(TensorDict(x=torch.zeros(3, 4)))["x"].shape == (3, 1, 4)


def test_spec_hooks_called_on_an_env_spec_leave_it_untouched():
    env = DoubleEnv()
    out = DoubleToFloat().transform_observation_spec(env.observation_spec)
    assert out["obs_a"].dtype == torch.float32
    assert env.observation_spec["obs_a"].dtype == torch.float64
    done = StepCounter(3).transform_output_spec(env.output_spec)["full_done_spec"]
    assert "truncated" in done.keys() and "truncated" not in env.full_done_spec.keys()
