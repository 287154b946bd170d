"""Entry layout transforms of current torchrl: Stack, ExpandAs, Crop, UnaryTransform, Hash,
ModuleTransform, NextObservationDelta."""

from __future__ import annotations

import re

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule

from rlcore import check_env_specs
from rlmocks import (
    ContinuousActionConvMockEnv,
    ContinuousActionVecMockEnv,
    CountingEnv,
    GenericTestEnv,
)
from rlspecs import Bounded, Composite, NonTensor, Unbounded
from rltransforms import (
    Compose,
    Crop,
    ExpandAs,
    Hash,
    ModuleTransform,
    NextObservationDelta,
    Stack,
    StepCounter,
    TransformedEnv,
    UnaryTransform,
)

pytestmark = pytest.mark.filterwarnings("error")


def _two_agents_step(env, td):
    out = td.empty()
    for name in ("a", "b"):
        out.set(name, td[f"act_{name}"].clone())
    return out.set("reward", torch.zeros(1))


def _two_agents_env():
    observations = Composite(a=Unbounded((3,)), b=Unbounded((3,)))
    actions = Composite(act_a=Bounded(-1.0, 1.0, (3,)), act_b=Bounded(-1.0, 1.0, (3,)))
    return GenericTestEnv(
        observation_spec=observations, action_spec=actions, step_func=_two_agents_step
    )


# ---------------------------------------------------------------- Stack
def test_stack_gathers_observations_under_one_key():
    env = TransformedEnv(_two_agents_env(), Stack(in_keys=["a", "b"], out_key="ab", dim=-2))
    assert env.observation_spec["ab"].shape == (2, 3)
    assert "a" not in env.observation_spec.keys()
    check_env_specs(env)


def test_stack_inverse_unstacks_the_actions():
    t = Stack(
        in_keys=["act_a", "act_b"],
        out_key="acts",
        in_key_inv="acts",
        out_keys_inv=["act_a", "act_b"],
        dim=-2,
    )
    input_spec = t.transform_input_spec(_two_agents_env().input_spec.clone())
    assert input_spec["full_action_spec", "acts"].shape == (2, 3)
    assert "act_a" not in input_spec["full_action_spec"].keys()
    td = t.inv(TensorDict(acts=torch.stack([torch.ones(3), -torch.ones(3)])))
    assert td["act_a"].tolist() == [1.0] * 3 and td["act_b"].tolist() == [-1.0] * 3
    assert "acts" not in td.keys()


def test_stack_of_tensordicts_drops_emptied_parents():
    td = TensorDict(
        {"agents": {"x": {"obs": torch.zeros(2)}, "y": {"obs": torch.ones(2)}}, "other": 1}
    )
    out = Stack(in_keys=[("agents", "x"), ("agents", "y")], out_key="stacked")(td)
    assert out["stacked", "obs"].tolist() == [[0.0, 0.0], [1.0, 1.0]]
    assert "agents" not in out.keys()


def test_stack_keeps_inputs_on_request():
    td = Stack(["a", "b"], "ab", del_keys=False)(TensorDict(a=torch.zeros(1), b=torch.ones(1)))
    assert sorted(td.keys()) == ["a", "ab", "b"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"dim": 0}, "dim should be negative"),
        ({"out_keys_inv": ["a"]}, "out_keys_inv was specified, but in_key_inv was not"),
        ({"in_key_inv": "ab"}, "in_key_inv was specified, but out_keys_inv was not"),
        ({"out_key": "a"}, "out_key cannot be in in_keys"),
    ],
)
def test_stack_rejects_bad_arguments(kwargs, message):
    kwargs = {"in_keys": ["a", "b"], "out_key": "ab", **kwargs}
    with pytest.raises(ValueError, match=re.escape(message)):
        Stack(**kwargs)


def test_stack_missing_input_names_it():
    with pytest.raises(KeyError, match="'b' not found"):
        Stack(["a", "b"], "ab")(TensorDict(a=torch.zeros(1)))


# ---------------------------------------------------------------- ExpandAs
def _wide_reward_step(env, td):
    return td.empty().update({"observation": td["observation"] + 1, "reward": torch.ones(3, 1)})


def _wide_reward_env():
    return GenericTestEnv(
        observation_spec=Unbounded((1,)),
        action_spec=Bounded(-1.0, 1.0, (1,)),
        reward_spec=Unbounded((3, 1)),
        step_func=_wide_reward_step,
    )


def test_expand_as_writes_done_at_the_reward_shape():
    env = TransformedEnv(_wide_reward_env(), ExpandAs("done", "reward", out_key="wide_done"))
    assert env.observation_spec["wide_done"].shape == (3, 1)
    check_env_specs(env)
    td = env.reset()
    assert td["wide_done"].shape == (3, 1)  # no reward at reset: the spec gives the shape


def test_expand_as_in_place_key_keeps_its_group():
    env = TransformedEnv(_wide_reward_env(), ExpandAs("observation", "reward"))
    assert env.observation_spec["observation"].shape == (3, 1)
    assert env.rollout(2)["next", "observation"].shape == (2, 3, 1)


def test_expand_as_unknown_key_in_specs():
    with pytest.raises(KeyError, match="Key missing was not found in output specs."):
        TransformedEnv(_wide_reward_env(), ExpandAs("missing", "reward"))


def test_expand_as_missing_entry_names_it():
    with pytest.raises(KeyError, match="'ref' not found"):
        ExpandAs("x", "ref")(TensorDict(x=torch.zeros(1)))


# ---------------------------------------------------------------- Crop
def test_crop_keeps_the_window_of_images():
    env = TransformedEnv(ContinuousActionConvMockEnv(), Crop(3, 4, top=1, left=2))
    assert env.observation_spec["pixels"].shape == (1, 3, 4)
    check_env_specs(env)
    td = TensorDict(pixels=torch.arange(49.0).view(1, 7, 7))
    assert torch.equal(
        Crop(3, 4, top=1, left=2)(td)["pixels"], torch.arange(49.0).view(1, 7, 7)[:, 1:4, 2:6]
    )


def test_crop_square_by_default_and_pads_past_the_image():
    out = Crop(3, top=-1, left=1)(TensorDict(pixels=torch.ones(2, 2)))["pixels"]
    assert out.tolist() == [[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [1.0, 0.0, 0.0]]


def test_crop_bounded_spec_keeps_its_bounds():
    spec = Crop(2).transform_observation_spec(Bounded(0.0, 1.0, (1, 4, 4)))
    assert isinstance(spec, Bounded) and spec.shape == (1, 2, 2)


def test_crop_rejects_a_one_dim_input():
    with pytest.raises(ValueError, match="at least 2 dims"):
        Crop(2)(TensorDict(pixels=torch.zeros(4)))


# ---------------------------------------------------------------- UnaryTransform and Hash
def _to_text(tensor):
    return str(tensor.tolist())


def test_unary_transform_output_spec_follows_the_function():
    env = TransformedEnv(
        CountingEnv(),
        UnaryTransform(in_keys=["observation"], out_keys=["obs_text"], fn=_to_text),
    )
    assert isinstance(env.observation_spec["obs_text"], NonTensor)
    check_env_specs(env)
    rollout = env.rollout(2, lambda td: td.set("action", torch.ones(1, dtype=torch.int8)))
    assert list(rollout["next", "obs_text"]) == ["[1]", "[2]"]


def test_unary_transform_inverse_uses_inv_fn():
    t = UnaryTransform(
        in_keys=[],
        out_keys=[],
        in_keys_inv=["action"],
        out_keys_inv=["action_x2"],
        fn=lambda x: x * 2,
        inv_fn=lambda x: x / 2,
    )
    env = TransformedEnv(ContinuousActionVecMockEnv(), t)
    assert "action_x2" in env.full_action_spec.keys()
    assert t.inv(TensorDict(action_x2=torch.full((7,), 4.0)))["action"].tolist() == [2.0] * 7


def test_unary_transform_passes_raw_non_tensors_on_request():
    seen = []
    t = UnaryTransform(
        ["s"],
        ["n"],
        fn=lambda v: seen.append(type(v).__name__) or torch.zeros(1),
        use_raw_nontensor=True,
    )
    t(TensorDict(s="x"))
    assert seen == ["NonTensorData"]


def test_hash_of_strings_is_sha256_and_reproducible():
    out = Hash(in_keys=["text"], out_keys=["hash"])(TensorDict(text="hello"))
    assert bytes(out["hash"].tolist()).hex().startswith("2cf24dba5fb0a30e")


def test_hash_seed_changes_the_hash():
    plain = Hash(["text"], ["h"])(TensorDict(text="a"))["h"]
    seeded = Hash(["text"], ["h"], seed="salt")(TensorDict(text="a"))["h"]
    assert not torch.equal(plain, seeded)
    assert torch.equal(seeded, Hash.reproducible_hash("salta"))


def test_hash_of_a_batch_of_strings_hashes_each_item():
    td = TensorDict(batch_size=[2])
    td.set("text", ["a", "b"])
    hashes = Hash(["text"], ["h"])(td)["h"]
    assert hashes.shape == (2, 32) and not torch.equal(hashes[0], hashes[1])


def test_hash_in_an_env_chained_after_a_unary_transform():
    env = TransformedEnv(
        CountingEnv(),
        UnaryTransform(in_keys=["observation"], out_keys=["obs_text"], fn=_to_text),
    )
    env.append_transform(Hash(in_keys=["obs_text"], out_keys=["obs_hash"]))
    assert env.observation_spec["obs_hash"].shape == (32,)
    check_env_specs(env)


def test_hash_repertoire_maps_hashes_back_and_travels_in_the_state_dict():
    t = Hash(["text"], ["h"], in_keys_inv=["text"], out_keys_inv=["h"])
    h = t(TensorDict(text="hello"))["h"]
    assert t.inv(TensorDict(h=h))["text"] == "hello"
    other = Hash(["text"], ["h"], in_keys_inv=["text"], out_keys_inv=["h"])
    other.load_state_dict(t.state_dict())
    assert other.get_input_from_hash(h) == "hello"


def test_hash_without_repertoire_cannot_invert():
    with pytest.raises(RuntimeError, match="the repertoire is None"):
        Hash(["text"], ["h"]).get_input_from_hash(torch.zeros(32))


def test_hash_function_must_return_a_tensor():
    with pytest.raises(
        ValueError, match="Hash function must return a tensor, but got <class 'int'>"
    ):
        Hash(["text"], ["h"], hash_fn=lambda v: 3)(TensorDict(text="a"))


# ---------------------------------------------------------------- ModuleTransform
def _double_module():
    return TensorDictModule(lambda x: x * 2, in_keys=["observation"], out_keys=["obs2"])


def test_module_transform_runs_the_module_on_step_outputs():
    def add_obs2(spec):
        spec["obs2"] = spec["observation"].clone()
        return spec

    env = TransformedEnv(
        ContinuousActionVecMockEnv(),
        ModuleTransform(module=_double_module(), observation_spec_transform=add_obs2),
    )
    td = env.rand_step(env.reset())
    torch.testing.assert_close(td["next", "obs2"], td["next", "observation"] * 2)


def test_module_transform_inverse_runs_on_the_env_input():
    halve = TensorDictModule(lambda a: a / 2, in_keys=["big_action"], out_keys=["action"])
    t = ModuleTransform(module_factory=lambda: halve, inverse=True, no_grad=True)
    assert (t.in_keys, t.out_keys_inv, t.in_keys_inv) == ([], ["big_action"], ["action"])
    out = t.inv(TensorDict(big_action=torch.full((7,), 4.0)))
    assert out["action"].tolist() == [2.0] * 7


def test_module_transform_spec_given_as_a_spec():
    spec = Composite(
        observation=Unbounded((7,)), observation_orig=Unbounded((7,)), obs2=Unbounded((7,))
    )
    env = TransformedEnv(
        ContinuousActionVecMockEnv(),
        ModuleTransform(module=_double_module(), observation_spec_transform=spec),
    )
    assert "obs2" in env.observation_spec.keys()
    assert "obs2" not in env.reset().keys()  # as torchrl: reset outputs are not transformed
    assert "obs2" in env.rand_step(env.reset())["next"].keys()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "At least one of `module` or `module_factory` must be provided."),
        ({"module": 1, "module_factory": 2}, "Only one of `module` or `module_factory`"),
        ({"module": 1, "use_ray_service": True}, "not part of rltransforms"),
    ],
)
def test_module_transform_rejects_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        ModuleTransform(**kwargs)


def test_module_transform_keys_cannot_be_set():
    t = ModuleTransform(module=_double_module())
    with pytest.raises(RuntimeError, match="in_keys \\['x'\\] cannot be set"):
        t.in_keys = ["x"]


# ---------------------------------------------------------------- NextObservationDelta
def test_next_observation_delta_infers_floating_observations():
    env = TransformedEnv(CountingEnv(), NextObservationDelta())
    assert env.transform.in_keys == []  # int32 observations are excluded
    env = TransformedEnv(ContinuousActionVecMockEnv(), NextObservationDelta())
    assert env.transform.in_keys == ["observation", "observation_orig"]


def test_next_observation_delta_writes_low_precision_deltas():
    env = TransformedEnv(ContinuousActionVecMockEnv(), NextObservationDelta(["observation"]))
    td = env.rand_step(env.reset())
    delta = td["next", "delta", "observation"]
    assert delta.dtype == torch.float16
    expected = (td["next", "observation"] - td["observation"]).half()
    assert torch.equal(delta, expected)


def test_next_observation_delta_hook_drops_the_full_next_observation():
    t = NextObservationDelta(["obs"])
    td = TensorDict({"obs": torch.zeros(2), ("next", "obs"): torch.ones(2)})
    transition, root = t._post_step_mdp_hooks(td, TensorDict(obs=torch.ones(2)))
    assert ("next", "obs") not in transition.keys(True) and "obs" in root.keys()


def test_next_observation_delta_restores_next_observations_from_data():
    t = NextObservationDelta(["obs"], restore_dtype=torch.float64, drop_delta=False)
    td = TensorDict({"obs": torch.ones(2), ("next", "delta", "obs"): torch.full((2,), 0.5).half()})
    out = t(td)
    assert out["next", "obs"].dtype == torch.float64 and out["next", "obs"].tolist() == [1.5, 1.5]
    assert ("next", "delta", "obs") in out.keys(True)


def test_next_observation_delta_fake_tensordict_layout():
    t = NextObservationDelta(["obs"])
    fake = t.transform_fake_tensordict(TensorDict({("next", "obs"): torch.zeros(2)}))
    assert list(fake["next"].keys(True, True)) == [("delta", "obs")]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"delta_dtype": torch.int8}, "delta_dtype must be a floating-point dtype"),
        ({"restore_dtype": torch.int64}, "restore_dtype must be a floating-point dtype or 'root'"),
    ],
)
def test_next_observation_delta_rejects_non_float_dtypes(kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        NextObservationDelta(**kwargs)


def test_next_observation_delta_refuses_batched_workers():
    with pytest.raises(RuntimeError, match="cannot live inside a SerialEnv/ParallelEnv worker"):
        NextObservationDelta()._check_batched_worker_compat()


def _delta_env():
    return TransformedEnv(ContinuousActionVecMockEnv(), NextObservationDelta(["observation"]))


def test_post_step_hooks_are_exposed_only_when_a_transform_has_one():
    assert TransformedEnv(CountingEnv(), StepCounter())._post_step_mdp_hooks is None
    assert callable(_delta_env()._post_step_mdp_hooks)


def test_step_and_maybe_reset_runs_the_post_step_hooks():
    env = _delta_env()
    td, root = env.step_and_maybe_reset(env.rand_action(env.reset()))
    assert ("next", "observation") not in td.keys(True)
    assert td["next", "delta", "observation"].dtype == torch.float16
    restored = td["observation"] + td["next", "delta", "observation"].float()
    assert torch.allclose(root["observation"], restored, atol=1e-2)
    assert root["observation"].dtype == torch.float32  # the policy reads full precision


def test_post_step_hooks_of_a_wrapped_transformed_env_run_too():
    env = TransformedEnv(_delta_env(), StepCounter(), auto_unwrap=False)
    td, _ = env.step_and_maybe_reset(env.rand_action(env.reset()))
    assert ("next", "observation") not in td.keys(True)


def test_rollout_steps_keep_the_same_entries_with_post_step_hooks():
    # rlcore's rollout does not run the hooks (its last step has no step_mdp): none of its
    # steps drops the full next observation, so they stack
    rollout = _delta_env().rollout(3, break_when_any_done=False)
    assert rollout.shape == (3,)
    assert {("next", "observation"), ("next", "delta", "observation")} <= set(rollout.keys(True))


def test_fake_tensordict_goes_through_the_transforms():
    fake = _delta_env().fake_tensordict()
    assert ("next", "observation") not in fake.keys(True)
    assert fake["next", "delta", "observation"].dtype == torch.float16


def test_batched_worker_check_goes_through_compose_and_wrapped_envs():
    inner = TransformedEnv(CountingEnv(), Compose(StepCounter(), NextObservationDelta()))
    env = TransformedEnv(inner, StepCounter(), auto_unwrap=False)
    with pytest.raises(RuntimeError, match="NextObservationDelta cannot live inside a SerialEnv"):
        env._check_batched_worker_compat()
    TransformedEnv(CountingEnv(), StepCounter())._check_batched_worker_compat()
