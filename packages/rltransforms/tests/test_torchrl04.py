"""Transform behaviour a torchrl 0.4 user relies on (gaps found reviewing against 0.4)."""

from __future__ import annotations

import pytest
import torch
from _transform_envs import CountEnv
from tensordict import TensorDict

from rlcore import check_env_specs
from rlspecs import Unbounded
from rltransforms import (
    CatFrames,
    Compose,
    DiscreteActionProjection,
    FrameSkipTransform,
    ObservationNorm,
    ObservationTransform,
    RenameTransform,
    SqueezeTransform,
    StepCounter,
    TensorDictPrimer,
    Transform,
    TransformedEnv,
    UnsqueezeTransform,
)

pytestmark = pytest.mark.filterwarnings("error")


class DoubleActionSeen(Transform):
    """Doubles the action on the way in and records the action its `_step` is given."""

    def __init__(self) -> None:
        super().__init__(in_keys_inv=["action"])
        self.seen: list[torch.Tensor] = []

    def _inv_apply_transform(self, state):
        return state * 2

    def _step(self, tensordict, next_tensordict):
        self.seen.append(tensordict["action"].clone())
        return next_tensordict


class RecordingEnv(CountEnv):
    def _step(self, tensordict):
        self.received = tensordict["action"].clone()
        return super()._step(tensordict)


def test_step_gives_transform_step_the_original_tensordict():
    # torchrl 0.4: TransformedEnv._step inverts a copy for the base env and hands the
    # caller's (non-inverted) tensordict to transform._step
    transform = DoubleActionSeen()
    env = TransformedEnv(RecordingEnv(), transform)
    td = env.reset()
    td["action"] = torch.full((1,), 3.0)
    out = env.step(td)
    assert env.base_env.received.item() == 6.0
    assert transform.seen[0].item() == 3.0
    assert out["action"].item() == 3.0
    assert td["action"].item() == 3.0


class ActionLog(CountEnv):
    def __init__(self) -> None:
        super().__init__()
        self.actions: list[float] = []

    def _step(self, tensordict):
        self.actions.append(tensordict["action"].item())
        return super()._step(tensordict)


def test_frame_skip_after_an_inverse_inverts_the_action_once():
    # FrameSkipTransform re-steps its parent with the caller's action: inverted once per step
    env = TransformedEnv(ActionLog(), Compose(DoubleActionSeen(), FrameSkipTransform(3)))
    td = env.reset()
    td["action"] = torch.full((1,), 1.5)
    out = env.step(td)
    assert env.base_env.actions == [3.0, 3.0, 3.0]
    assert out["next", "reward"].item() == 3.0
    assert out["action"].item() == 1.5


@pytest.mark.parametrize(
    ("cls", "old_name", "shape", "expected"),
    [
        (UnsqueezeTransform, "unsqueeze_dim", (3,), (3, 1)),
        (SqueezeTransform, "squeeze_dim", (3, 1), (3,)),
    ],
)
def test_unsqueeze_squeeze_take_the_dim_under_both_spellings(cls, old_name, shape, expected):
    # torchrl 0.4 names it unsqueeze_dim / squeeze_dim, later releases dim
    td = TensorDict(obs=torch.zeros(shape))
    for t in (cls(-1, in_keys=["obs"]), cls(dim=-1, in_keys=["obs"])):
        assert t(td.clone())["obs"].shape == expected
    assert getattr(cls(**{old_name: -1}, in_keys=["obs"]), old_name) == -1
    with pytest.raises(ValueError, match=f"dim=-1.*{old_name}=-2"):
        cls(-2, dim=-1, in_keys=["obs"])
    with pytest.raises(TypeError, match=f"{cls.__name__}.*{old_name}"):
        cls(in_keys=["obs"])


def test_observation_norm_is_an_observation_transform():
    assert isinstance(ObservationNorm(0.0, 1.0, in_keys=["observation"]), ObservationTransform)


def test_transformed_env_takes_cache_specs():
    # torchrl 0.4's third argument: with cache_specs=False the specs are recomputed from the
    # transform on every read, so a transform edited in place shows at once
    cached = TransformedEnv(CountEnv(), UnsqueezeTransform(-1, in_keys=["observation"]), True)
    fresh = TransformedEnv(
        CountEnv(), UnsqueezeTransform(-1, in_keys=["observation"]), cache_specs=False
    )
    assert cached.cache_specs and not fresh.cache_specs
    for env in (cached, fresh):
        env.transform.in_keys = ["reward"]
        env.transform.out_keys = ["reward"]
    assert cached.observation_spec["observation"].shape == (3, 1)  # cached: stale until rebuilt
    assert fresh.observation_spec["observation"].shape == (3,)
    assert fresh.reward_spec.shape == (1, 1)
    check_env_specs(fresh)
    assert fresh.rollout(3)["next", "reward"].shape == (3, 1, 1)


class Dumper(Transform):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list = []

    def dump(self, **kwargs):
        self.calls.append(("dump", kwargs))

    def init(self, tensordict):
        self.calls.append(("init", tensordict["x"].item()))


def test_compose_forwards_dump_and_init_to_its_members():
    # torchrl 0.4's hooks (trainers call env.transform.dump(suffix=...))
    first, second = Dumper(), Dumper()
    env = TransformedEnv(CountEnv(), Compose(first, StepCounter(), second))
    env.transform.dump(suffix="_end")
    env.transform.init(TensorDict(x=torch.ones(())))
    for t in (first, second):
        assert t.calls == [("dump", {"suffix": "_end"}), ("init", 1.0)]
    assert Transform().dump() is None


def test_inv_takes_tensors_as_keywords():
    # torchrl 0.4 dispatches inv like forward: keywords in, the base env's entries out
    t = ObservationNorm(1.0, 2.0, in_keys=["observation"], in_keys_inv=["action"])
    assert t.inv(action=torch.full((3,), 5.0)).tolist() == [2.0, 2.0, 2.0]
    renamed = RenameTransform(["a"], ["b"], in_keys_inv=["env_action"], out_keys_inv=["action"])
    assert renamed.inv(action=torch.ones(2)).tolist() == [1.0, 1.0]


@pytest.mark.parametrize(
    ("padding", "expected_next"),
    [
        ("same", [[0, 0, 10], [0, 10, 11], [10, 11, 12], [3, 3, 13], [3, 13, 14], [13, 14, 15]]),
        (
            "constant",
            [[-9, 0, 10], [0, 10, 11], [10, 11, 12], [-9, 3, 13], [3, 13, 14], [13, 14, 15]],
        ),
    ],
)
def test_catframes_offline_next_stack_reads_the_next_entries(padding, expected_next):
    # torchrl 0.4 unfolds ("next", key) along time from its own values; only the frames before
    # the episode start come from the root stack (the same for data a rollout wrote, where
    # next[t] == root[t + 1], different for data edited apart)
    obs = torch.arange(6.0).reshape(1, 6, 1)
    done = torch.zeros(1, 6, 1, dtype=torch.bool)
    done[0, 2] = True
    td = TensorDict(
        {"observation": obs, ("next", "observation"): obs + 10, ("next", "done"): done},
        [1, 6],
        names=[None, "time"],
    )
    t = CatFrames(
        N=3,
        dim=-1,
        in_keys=["observation", ("next", "observation")],
        padding=padding,
        padding_value=-9.0,
    )
    out = t(td)
    assert out["next", "observation"][0].tolist() == expected_next
    pad = -9 if padding == "constant" else 0
    assert out["observation"][0, :2].tolist() == [[pad, pad, 0], [pad, 0, 1]]


def test_observation_norm_with_stats_of_the_wrong_shape_names_the_key():
    t = ObservationNorm(torch.zeros(4), torch.ones(4), in_keys=["observation"])
    with pytest.raises(ValueError, match=r"\(4,\).*\(3,\) of 'observation'"):
        TransformedEnv(CountEnv(), t)
    inv = ObservationNorm(torch.zeros(3), torch.ones(3), in_keys=[], in_keys_inv=["action"])
    with pytest.raises(ValueError, match=r"\(1,\) of 'action'"):
        TransformedEnv(CountEnv(), inv)
    batched = TransformedEnv(
        CountEnv(batch_size=(2,)),
        ObservationNorm(torch.zeros(3), torch.ones(3), in_keys=["observation"]),
    )
    check_env_specs(batched)  # statistics broadcast over the batch dims


def test_discrete_action_projection_sized_for_another_env_names_the_action():
    from _transform_envs import OneHotEnv

    n = OneHotEnv().action_spec.shape[-1]
    env = TransformedEnv(OneHotEnv(), DiscreteActionProjection(n, n + 2))
    assert env.action_spec.shape == (n + 2,)
    with pytest.raises(ValueError, match=rf"'action' has {n} entries.*num_actions_effective=2"):
        TransformedEnv(OneHotEnv(), DiscreteActionProjection(2, n + 2))


def test_primer_expand_specs_as_later_torchrl_releases():
    # a per-env spec whose first dim happens to be the batch size: torchrl 0.4's guess keeps
    # it as is, expand_specs=True expands it, expand_specs=False requires the batch dims
    per_env = Unbounded((2,))
    guessed = TransformedEnv(CountEnv(batch_size=(2,)), TensorDictPrimer(h=per_env))
    assert guessed.reset()["h"].shape == (2,)
    expanded = TransformedEnv(
        CountEnv(batch_size=(2,)), TensorDictPrimer(h=per_env, expand_specs=True)
    )
    assert expanded.observation_spec["h"].shape == (2, 2)
    # rebuilt specs expand the given spec again, not the expanded one
    expanded.base_env.observation_spec = expanded.base_env.observation_spec.clone()
    assert expanded.state_spec["h"].shape == (2, 2)
    check_env_specs(expanded)
    assert expanded.rollout(3)["next", "h"].shape == (2, 3, 2)
    standalone = TensorDictPrimer(h=per_env, expand_specs=True)
    assert standalone(TensorDict(batch_size=[2]))["h"].shape == (2, 2)
    assert standalone.reset(TensorDict(batch_size=[2]))["h"].shape == (2, 2)
    with pytest.raises(ValueError, match=r"'h' has shape \(3,\).*\(2,\).*expand_specs=False"):
        TransformedEnv(
            CountEnv(batch_size=(2,)), TensorDictPrimer(h=Unbounded((3,)), expand_specs=False)
        )
    strict = TransformedEnv(
        CountEnv(batch_size=(2,)), TensorDictPrimer(h=Unbounded((2, 3)), expand_specs=False)
    )
    assert strict.reset()["h"].shape == (2, 3)


def test_init_stats_refused_by_the_specs_can_be_retried():
    # a batched env's rollouts are [B, T, ...]: reducing over dim 0 only leaves T in loc
    env = TransformedEnv(
        CountEnv(batch_size=(2,)), ObservationNorm(in_keys=["observation"], standard_normal=True)
    )
    with pytest.raises(ValueError, match=r"loc \(5, 3\).*\(2, 3\) of 'observation'"):
        env.transform.init_stats(5)
    assert not env.transform.initialized
    env.transform.init_stats(5, reduce_dim=(0, 1), cat_dim=0)
    assert env.transform.loc.shape == (3,)
    check_env_specs(env)
