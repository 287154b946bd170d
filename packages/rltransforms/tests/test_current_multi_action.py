"""MultiAction (a chunk of actions per outer step) and ActionChunkTransform (chunk targets)."""

from __future__ import annotations

import multiprocessing
import re

import pytest
import torch
from tensordict import TensorDict

from rlcore import check_env_specs
from rlmocks import CountingEnv, GenericTestEnv, StateLessCountingEnv
from rlspecs import Bounded, Unbounded
from rltransforms import ActionChunkTransform, Compose, MultiAction, StepCounter, TransformedEnv

rlbatched = pytest.importorskip("rlbatched", reason="the batched-env cases need rlbatched")

pytestmark = pytest.mark.filterwarnings("error")

PARALLEL = ["fork", "spawn"] if "fork" in multiprocessing.get_all_start_methods() else ["spawn"]


def _accumulate(env, td):
    # module level (spawned workers import it): observation += action, reward = observation
    obs = td["observation"] + td["action"]
    done = obs >= env.limit
    return td.empty().update(
        {"observation": obs, "reward": obs.clone(), "terminated": done, "done": done.clone()}
    )


def _make_accumulator(limit: float = 100.0, batch_size=()):
    env = GenericTestEnv(
        observation_spec=Unbounded((*batch_size, 1)),
        action_spec=Bounded(0.0, 10.0, (*batch_size, 1)),
        step_func=_accumulate,
        batch_size=batch_size,
    )
    env.limit = limit
    return env


def _make_short_accumulator():
    return _make_accumulator(limit=4.0)


def _accumulate_and_record(env, td):
    # module level, as _accumulate; records the batch size of every step the env takes
    env.stepped.append(tuple(td.batch_size))
    return _accumulate(env, td)


def _make_recording_accumulator(limit: float = 100.0, batch_size=()):
    env = _make_accumulator(limit, batch_size)
    env.step_func = _accumulate_and_record
    env.stepped = []
    return env


class _RecordingStateLessEnv(StateLessCountingEnv):
    """A StateLessCountingEnv (not batch-locked) recording the batch size of each step."""

    def __init__(self):
        super().__init__()
        self.stepped = []

    def _step(self, tensordict):
        self.stepped.append(tuple(tensordict.batch_size))
        return super()._step(tensordict)


def _chunk_policy(values, dtype=torch.float32):
    chunk = torch.tensor(values, dtype=dtype)

    def policy(td):
        return td.set("action", chunk.expand(*td.batch_size, *chunk.shape).clone())

    return policy


@pytest.fixture
def make_batched():
    opened = []

    def make(kind, factories):
        if kind == "serial":
            env = rlbatched.SerialEnv(len(factories), factories)
        else:
            env = rlbatched.ParallelEnv(len(factories), factories, mp_start_method=kind)
        opened.append(env)
        return env

    yield make
    for env in opened:
        env.close()


# ---------------------------------------------------------------- MultiAction
def test_multi_action_specs_gain_a_chunk_dim():
    env = TransformedEnv(_make_accumulator(), MultiAction(chunk_size=3))
    assert env.action_spec.shape == (3, 1)
    assert env.reward_spec.shape == (3, 1)
    assert env.observation_spec["observation"].shape == (1,)
    check_env_specs(env)


def test_multi_action_steps_each_action_and_stacks_the_rewards():
    env = TransformedEnv(_make_accumulator(), MultiAction(chunk_size=3))
    rollout = env.rollout(2, _chunk_policy([[1.0], [2.0], [3.0]]))
    assert rollout["next", "observation"].squeeze(-1).tolist() == [6.0, 12.0]
    assert rollout["next", "reward"].squeeze(-1).tolist() == [[1.0, 3.0, 6.0], [7.0, 9.0, 12.0]]


def test_multi_action_last_reward_only():
    env = TransformedEnv(_make_accumulator(), MultiAction(chunk_size=2, stack_rewards=False))
    assert env.reward_spec.shape == (1,)
    rollout = env.rollout(1, _chunk_policy([[1.0], [2.0]]))
    assert rollout["next", "reward"].tolist() == [[3.0]]


def test_multi_action_stacks_observations_on_request():
    env = TransformedEnv(_make_accumulator(), MultiAction(chunk_size=2, stack_observations=True))
    assert env.observation_spec["observation"].shape == (2, 1)
    rollout = env.rollout(1, _chunk_policy([[1.0], [2.0]]))
    assert rollout["next", "observation"].squeeze(-1).tolist() == [[1.0, 3.0]]


def test_multi_action_done_inside_the_chunk_skips_its_rest():
    env = TransformedEnv(_make_short_accumulator(), MultiAction(chunk_size=4))
    rollout = env.rollout(5, _chunk_policy([[1.0], [2.0], [3.0], [4.0]]))
    assert rollout.shape == (1,)
    assert rollout["next", "done"].item()
    assert rollout["next", "observation"].item() == 6.0  # the step that ended it: 1 + 2 + 3
    assert rollout["next", "reward"].squeeze(-1).tolist() == [[1.0, 3.0, 6.0, 0.0]]


def test_multi_action_does_not_step_a_done_env_again():
    base = _make_recording_accumulator(limit=4.0)
    env = TransformedEnv(base, MultiAction(chunk_size=4, stack_observations=True))
    td = env.step(_chunk_policy([[1.0], [2.0], [3.0], [4.0]])(env.reset()))
    assert base.stepped == [(), (), ()]  # the fourth action is skipped ("_step" all False)
    assert td["next", "observation"].squeeze(-1).tolist() == [1.0, 3.0, 6.0, 6.0]
    assert td["next", "reward"].squeeze(-1).tolist() == [1.0, 3.0, 6.0, 0.0]
    assert td["next", "done"].item()


def test_multi_action_step_ended_inside_the_chunk_skips_the_transforms_after_it():
    # current torchrl's behaviour: the last action is a skipped step for the whole env
    env = TransformedEnv(
        _make_accumulator(limit=6.0), Compose(MultiAction(chunk_size=4), StepCounter())
    )
    policy = _chunk_policy([[1.0], [1.0], [1.0], [1.0]])
    td = env.step(policy(env.reset()))
    assert td["next", "step_count"].item() == 1 and not td["next", "done"].item()
    td = env.step(policy(td["next"].clone()))  # ends at its second action (6)
    assert td["next", "done"].item() and td["next", "observation"].item() == 6.0
    assert td["next", "step_count"].item() == 1


def test_multi_action_skips_the_rest_of_the_chunk_of_a_done_batched_sub_env():
    envs = [_make_recording_accumulator(limit=4.0), _make_recording_accumulator()]
    batched = rlbatched.SerialEnv(2, [lambda: envs[0], lambda: envs[1]])
    env = TransformedEnv(batched, MultiAction(chunk_size=2))
    try:
        policy = _chunk_policy([[2.0], [1.0]])
        td = env.step(policy(env.reset()))
        td = env.step(policy(td["next"].clone()))  # sub-env 0 is done at 5, after one action
        assert [len(e.stepped) for e in envs] == [3, 4]
        assert td["next", "observation"].squeeze(-1).tolist() == [5.0, 6.0]
        assert td["next", "reward"].squeeze(-1).tolist() == [[5.0, 0.0], [5.0, 6.0]]
        assert td["next", "done"].squeeze(-1).tolist() == [True, False]
    finally:
        env.close()


def test_multi_action_done_row_of_a_locked_env_without_partial_steps():
    # rows end at different steps; the env cannot skip rows: the results are discarded instead
    env = TransformedEnv(_make_accumulator(limit=4.0, batch_size=(2,)), MultiAction(chunk_size=3))
    chunk = torch.tensor([[[2.0], [3.0], [1.0]], [[1.0], [1.0], [1.0]]])
    td = env.step(env.reset().set("action", chunk))
    assert td["next", "observation"].squeeze(-1).tolist() == [5.0, 3.0]
    assert td["next", "reward"].squeeze(-1).tolist() == [[2.0, 5.0, 0.0], [1.0, 2.0, 3.0]]
    assert td["next", "done"].squeeze(-1).tolist() == [True, False]


def test_multi_action_skips_done_rows_of_an_unlocked_env():
    base = _RecordingStateLessEnv()
    env = TransformedEnv(base, MultiAction(chunk_size=4))
    root = base.reset(
        TensorDict(max_count=torch.tensor([[2], [10]], dtype=torch.int32), batch_size=[2])
    )
    td = env.step(root.set("action", torch.ones(2, 4, 1, dtype=torch.int32)))
    # row 0 ends at its second action: the third skips it, the last (stateless) is discarded
    assert base.stepped == [(2,), (2,), (1,), (2,)]
    assert td["next", "count"].squeeze(-1).tolist() == [2, 4]
    assert td["next", "done"].squeeze(-1).tolist() == [True, False]


def test_multi_action_counts_inner_steps_of_transforms_before_it():
    base = TransformedEnv(CountingEnv(max_steps=100), StepCounter())
    env = TransformedEnv(base, MultiAction(chunk_size=3), auto_unwrap=False)
    rollout = env.rollout(2, _chunk_policy([[1], [1], [1]], dtype=torch.int8))
    assert rollout["next", "step_count"].squeeze(-1).tolist() == [3, 6]


@pytest.mark.parametrize("kind", ["serial", *PARALLEL])
def test_multi_action_over_a_batched_env(make_batched, kind):
    # sub-env 0 is done inside the second chunk (at 6 >= 4), sub-env 1 never
    batched = make_batched(kind, [_make_short_accumulator, _make_accumulator])
    env = TransformedEnv(batched, MultiAction(chunk_size=2))
    check_env_specs(env)
    rollout = env.rollout(3, _chunk_policy([[2.0], [1.0]]), break_when_any_done=False)
    assert rollout["next", "observation"].squeeze(-1).tolist() == [[3.0, 5.0, 3.0], [3.0, 6.0, 9.0]]
    assert rollout["next", "done"].squeeze(-1).tolist() == [[False, True, False], [False] * 3]
    assert rollout["next", "reward"][0, 1].squeeze(-1).tolist() == [5.0, 0.0]


def test_multi_action_needs_a_chunk_size():
    with pytest.raises(ValueError, match="MultiAction needs chunk_size=H"):
        TransformedEnv(_make_accumulator(), MultiAction())


def test_multi_action_rejects_a_non_positive_dim():
    with pytest.raises(ValueError, match="dim must be greater than 0"):
        MultiAction(dim=0, chunk_size=2)


def test_multi_action_missing_chunk_names_the_key():
    env = TransformedEnv(_make_accumulator(), MultiAction(chunk_key="plan", chunk_size=2))
    with pytest.raises(KeyError, match="expected stacked actions at key 'plan'"):
        env.transform._inv_call(env.reset())


def test_multi_action_chunk_of_the_wrong_length():
    env = TransformedEnv(_make_accumulator(), MultiAction(chunk_size=2))
    multi = env.transform
    with pytest.raises(
        ValueError, match=re.escape("has 3 actions along dim 0, expected chunk_size=2")
    ):
        multi._inv_call(env.reset().set("action", torch.zeros(3, 1)))


def test_multi_action_from_vla_reads_the_vla_chunk():
    env = TransformedEnv(_make_accumulator(), MultiAction.from_vla(chunk_size=2))
    assert ("vla_action", "chunk") in env.full_action_spec.keys(True)
    td = env.step(env.reset().set(("vla_action", "chunk"), torch.ones(2, 1)))
    assert td["next", "observation"].item() == 2.0


# ---------------------------------------------------------------- ActionChunkTransform
def test_action_chunk_gathers_upcoming_actions_and_flags_padding():
    t = ActionChunkTransform(chunk_size=3)
    td = t(TensorDict(action=torch.arange(4.0).view(1, 4, 1), batch_size=[1, 4]))
    assert td["vla_action", "chunk"][0, :, :, 0].tolist() == [
        [0, 1, 2],
        [1, 2, 3],
        [2, 3, 3],
        [3, 3, 3],
    ]
    assert td["action_is_pad"][0].sum(-1).tolist() == [0, 0, 1, 2]


def test_action_chunk_stops_at_trajectory_boundaries():
    t = ActionChunkTransform(chunk_size=3, chunk_key="chunk", pad_key="pad")
    td = TensorDict(
        {
            "action": torch.arange(4.0).view(4, 1),
            ("next", "done"): torch.tensor([[False], [True], [False], [False]]),
        },
        batch_size=[4],
    )
    td = t(td)
    assert td["chunk"][..., 0].tolist() == [[0, 1, 1], [1, 1, 1], [2, 3, 3], [3, 3, 3]]
    assert td["pad"].tolist()[0] == [False, False, True]


def test_action_chunk_done_key_none_ignores_done():
    t = ActionChunkTransform(chunk_size=2, done_key=None)
    td = TensorDict(
        {"action": torch.arange(3.0).view(3, 1), ("next", "done"): torch.ones(3, 1, dtype=bool)},
        batch_size=[3],
    )
    assert t(td)["vla_action", "chunk"][0, :, 0].tolist() == [0.0, 1.0]


def test_action_chunk_is_a_no_op_in_an_env():
    base = _make_accumulator()
    env = TransformedEnv(_make_accumulator(), ActionChunkTransform(chunk_size=2))
    assert env.full_action_spec == base.full_action_spec
    assert ("vla_action", "chunk") not in env.rollout(2, _chunk_policy([1.0])).keys(True)


@pytest.mark.parametrize(
    ("td", "message"),
    [
        (TensorDict(action=torch.zeros(4)), "expects the action dimension to immediately follow"),
        (
            TensorDict({"action": torch.zeros(4, 1), ("next", "done"): torch.zeros(4, 2)}),
            "does not line up with the action",
        ),
    ],
)
def test_action_chunk_rejects_bad_layouts(td, message):
    with pytest.raises(ValueError, match=message):
        ActionChunkTransform(chunk_size=2)(td)


def test_action_chunk_rejects_an_empty_horizon():
    with pytest.raises(ValueError, match="chunk_size must be >= 1, got 0."):
        ActionChunkTransform(chunk_size=0)


def test_action_chunk_missing_action_names_the_key():
    with pytest.raises(KeyError, match="'action' not found"):
        ActionChunkTransform(chunk_size=2)(TensorDict(obs=torch.zeros(2)))
