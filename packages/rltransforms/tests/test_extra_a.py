"""torchrl 0.4 transforms alone, in a Compose and in an env: FiniteTensorDictCheck,
PinMemoryTransform, RandomCropTensorDict, BatchSizeTransform."""

from __future__ import annotations

import re

import pytest
import torch
from _transform_envs import CountEnv
from tensordict import TensorDict, TensorDictBase
from torch import nn

from rlcore import EnvBase, check_env_specs
from rlspecs import Composite, Unbounded
from rltransforms import (
    BatchSizeTransform,
    Compose,
    FiniteTensorDictCheck,
    PinMemoryTransform,
    RandomCropTensorDict,
    RewardSum,
    StepCounter,
    TransformedEnv,
)
from rltransforms._batch_size import EXPAND_ERROR, ONE_OF_ERROR, STEP_BATCH_ERROR
from rltransforms._checks import NON_FINITE_ERROR
from rltransforms._pin_memory import PIN_ERROR
from rltransforms._sequences import (
    EMPTY_SHAPE_ERROR,
    ENV_ERROR,
    MASK_DTYPE_ERROR,
    MASK_SHAPE_ERROR,
    MASK_TOO_SHORT_ERROR,
    POSITIVE_DIM_WARNING,
    SUB_SEQ_LEN_ERROR,
    TOO_SHORT_ERROR,
)

pytestmark = pytest.mark.filterwarnings("error")


def _torch_pin_error() -> RuntimeError | None:
    """The error torch raises when pinning a CPU tensor here (None where it can pin)."""
    try:
        torch.zeros(1).pin_memory()
    except RuntimeError as err:
        return err
    return None


class NonFiniteEnv(CountEnv):
    """A CountEnv whose observation becomes `value` at step `at` (and at reset when `at == 0`)."""

    def __init__(self, at: int, value: float = float("nan"), **kwargs) -> None:
        super().__init__(**kwargs)
        self.at, self.value = at, value

    def _poison(self, out: TensorDictBase) -> TensorDictBase:
        if int(self.count.flatten()[0]) == self.at:
            out["observation"][..., 0] = self.value
        return out

    def _reset(self, tensordict):
        return self._poison(super()._reset(tensordict))

    def _step(self, tensordict):
        return self._poison(super()._step(tensordict))


class StatelessEnv(EnvBase):
    """torchrl 0.4's BatchSizeTransform docstring env: not batch-locked, outputs follow inputs.

    The observation is random plus the action; `reset_inputs` records each reset input.
    """

    _batch_locked = False

    def __init__(self) -> None:
        super().__init__()
        self.observation_spec = Composite(observation=Unbounded(3))
        self.reward_spec = Unbounded(1)
        self.action_spec = Unbounded(1)
        self.reset_inputs: list = []

    def _reset(self, tensordict, **kwargs):
        self.reset_inputs.append(tensordict)
        batch_size = tensordict.batch_size if tensordict is not None else torch.Size([])
        result = self.observation_spec.rand(batch_size)
        result.update(self.full_done_spec.zero(batch_size))
        return result

    def _step(self, tensordict):
        result = self.observation_spec.rand(tensordict.batch_size)
        result["observation"] += tensordict["action"]
        result.update(self.full_done_spec.zero(tensordict.batch_size))
        result.update(self.full_reward_spec.zero(tensordict.batch_size))
        return result

    def _set_seed(self, seed):
        return None


class BatchRecorder(CountEnv):
    """A CountEnv that records the batch size of the reset inputs and actions it gets."""

    def _reset(self, tensordict):
        self.reset_batch = None if tensordict is None else tensordict.batch_size
        return super()._reset(tensordict)

    def _step(self, tensordict):
        self.action_batch = tensordict.batch_size
        return super()._step(tensordict)


# ------------------------------------------------------------------------ FiniteTensorDictCheck
def test_finite_check_returns_finite_data_unchanged():
    check = FiniteTensorDictCheck()
    td = TensorDict(
        obs=torch.randn(2, 3),
        count=torch.arange(2),
        flag=torch.ones(2, dtype=torch.bool),
        nested=TensorDict(x=torch.zeros(2, 1), batch_size=[2]),
        note="text",
        batch_size=[2],
    )
    assert check(td) is td
    assert check.in_keys == [] and check.out_keys == []
    assert nn.Sequential(check)(td) is td


@pytest.mark.parametrize(
    "value, nan, inf", [(float("nan"), 1, 0), (float("inf"), 0, 1), (-float("inf"), 0, 1)]
)
def test_finite_check_names_the_non_finite_key(value, nan, inf):
    bad = torch.zeros(2, 4)
    bad[1, 2] = value
    td = TensorDict(ok=torch.zeros(2), nested=TensorDict(x=bad, batch_size=[2]), batch_size=[2])
    expected = NON_FINITE_ERROR.format(
        key=("nested", "x"), shape=(2, 4), dtype=torch.float32, bad=1, numel=8, nan=nan, inf=inf
    )
    with pytest.raises(ValueError, match=re.escape(expected)):
        FiniteTensorDictCheck()(td)


def test_finite_check_checks_every_float_dtype_and_stored_next_entries():
    # torchrl 0.4 applies its check to every leaf: a replay-buffer sample's ("next", "reward")
    # and a float64 or complex entry are checked too
    sample = TensorDict(
        obs=torch.zeros(4, 2, dtype=torch.float64),
        next=TensorDict(reward=torch.tensor([[0.0], [1.0], [float("nan")], [2.0]]), batch_size=[4]),
        batch_size=[4],
    )
    with pytest.raises(ValueError, match=r"entry \('next', 'reward'\) \(shape \(4, 1\)"):
        FiniteTensorDictCheck()(sample)
    complex_td = TensorDict(z=torch.tensor([1 + 1j, complex(float("inf"), 0)]))
    with pytest.raises(ValueError, match="entry 'z'"):
        FiniteTensorDictCheck()(complex_td)
    sample["next", "reward"].nan_to_num_(0.0)
    assert FiniteTensorDictCheck()(sample) is sample


def test_finite_check_in_an_env_raises_at_the_non_finite_step():
    env = TransformedEnv(NonFiniteEnv(at=3), FiniteTensorDictCheck())
    assert env.output_spec == env.base_env.output_spec
    assert env.input_spec == env.base_env.input_spec
    env.rollout(2)  # steps 1 and 2 are finite
    with pytest.raises(ValueError, match=r"entry 'observation' \(shape \(3,\)"):
        env.rollout(5)
    check_env_specs(TransformedEnv(NonFiniteEnv(at=-1), FiniteTensorDictCheck()))


def test_finite_check_runs_on_reset_and_in_a_compose():
    env = TransformedEnv(NonFiniteEnv(at=0, value=float("inf")), FiniteTensorDictCheck())
    with pytest.raises(ValueError, match="'observation'.*nan: 0, inf: 1"):
        env.reset()
    env = TransformedEnv(
        NonFiniteEnv(at=2, batch_size=(2,)), Compose(RewardSum(), FiniteTensorDictCheck())
    )
    check_env_specs(TransformedEnv(CountEnv(batch_size=(2,)), env.transform.clone()))
    td = env.reset()
    td = env.step(td.set("action", torch.zeros(2, 1)))
    assert td["next", "episode_reward"].tolist() == [[1.0], [1.0]]
    with pytest.raises(ValueError, match=r"entry 'observation' \(shape \(2, 3\)"):
        env.step(td["next"].clone().set("action", torch.zeros(2, 1)))


# ------------------------------------------------------------------------ PinMemoryTransform
def _record_pins(monkeypatch) -> list[torch.Size]:
    """Replace `TensorDictBase.pin_memory` by a marked copy; returns the batch sizes it copies."""
    calls: list[torch.Size] = []

    def pin_memory(tensordict: TensorDictBase, *args, **kwargs) -> TensorDictBase:
        calls.append(tensordict.batch_size)
        out = tensordict.clone()
        out.set_non_tensor("pinned_by_test", True)
        return out

    monkeypatch.setattr(TensorDictBase, "pin_memory", pin_memory)
    return calls


def test_pin_memory_pins_or_refuses_as_torch_does():
    td = TensorDict(obs=torch.zeros(2, 3), nested=TensorDict(x=torch.ones(2), batch_size=[2]))
    td.batch_size = [2]
    torch_error = _torch_pin_error()
    if torch_error is None:
        out = PinMemoryTransform()(td)
        assert out["obs"].is_pinned() and out["nested", "x"].is_pinned()
        assert (out["obs"] == td["obs"]).all()
        return
    expected = PIN_ERROR.format(batch_size=(2,), keys=["('nested', 'x')", "obs"], error=torch_error)
    with pytest.raises(RuntimeError, match=re.escape(expected)) as info:
        PinMemoryTransform()(td)
    assert type(info.value.__cause__) is RuntimeError
    assert str(info.value.__cause__) == str(torch_error)


def test_pin_memory_copies_step_and_reset_outputs(monkeypatch):
    calls = _record_pins(monkeypatch)
    env = TransformedEnv(CountEnv(batch_size=(2,)), PinMemoryTransform())
    assert env.output_spec == env.base_env.output_spec
    td = env.reset()
    assert calls == [torch.Size([2])] and td["pinned_by_test"]
    td = env.step(td.set("action", torch.zeros(2, 1)))
    assert td["next", "pinned_by_test"] and td["next", "observation"].tolist() == [[1.0] * 3] * 2
    assert len(calls) == 2
    rollout = env.rollout(3)
    assert len(calls) == 2 + 1 + 3 and rollout.batch_size == (2, 3)
    check_env_specs(TransformedEnv(CountEnv(), Compose(StepCounter(), PinMemoryTransform())))
    out = Compose(PinMemoryTransform())(TensorDict(a=torch.zeros(1)))
    assert out["pinned_by_test"]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA")
def test_pin_memory_env_outputs_are_pinned_for_async_copies():
    env = TransformedEnv(CountEnv(batch_size=(2,)), PinMemoryTransform())
    check_env_specs(env)
    rollout = env.rollout(3)
    td = env.reset()
    assert td["observation"].is_pinned()
    td = env.step(td.set("action", torch.zeros(2, 1)))
    assert td["next", "observation"].is_pinned()
    on_gpu = td["next"].to("cuda", non_blocking=True)
    torch.cuda.synchronize()
    assert (on_gpu["observation"].cpu() == 1).all() and rollout.batch_size == (2, 3)


# ------------------------------------------------------------------------ RandomCropTensorDict
def _trajectories(batch: int = 3, steps: int = 10) -> TensorDict:
    """obs[b, t] = 100 * b + t, with a ("next", "obs") one step ahead."""
    obs = 100 * torch.arange(batch).unsqueeze(-1) + torch.arange(steps)
    return TensorDict(
        obs=obs,
        pixels=obs[..., None, None].expand(batch, steps, 2, 2).float(),
        next=TensorDict(obs=obs + 1, batch_size=[batch, steps]),
        batch_size=[batch, steps],
    )


def test_random_crop_gathers_consecutive_steps_of_each_trajectory():
    data = _trajectories()
    crop = RandomCropTensorDict(sub_seq_len=4)(data)
    assert crop.batch_size == (3, 4) and crop["pixels"].shape == (3, 4, 2, 2)
    starts = crop["obs"][:, 0] % 100
    for b in range(3):
        start = int(starts[b])
        assert (crop[b] == data[b, start : start + 4]).all()
    assert (crop["next", "obs"] == crop["obs"] + 1).all()
    assert (crop["obs"] // 100 == torch.arange(3).unsqueeze(-1)).all()  # rows stay apart


def test_random_crop_draws_every_start_and_each_trajectory_its_own():
    # starts are uniform over [0, T - sub_seq_len]: the last one included (torchrl 0.4 never
    # draws T - sub_seq_len, and fails when T == sub_seq_len)
    torch.manual_seed(0)
    data = _trajectories(batch=8)
    crop = RandomCropTensorDict(4)
    starts = torch.stack([crop(data)["obs"][:, 0] % 100 for _ in range(200)])
    assert set(starts.flatten().tolist()) == set(range(7))
    assert (starts != starts[:, :1]).any(dim=1).all()  # trajectories crop independently
    whole = RandomCropTensorDict(10)(data)
    assert (whole == data).all()


def test_random_crop_along_another_dim():
    # as in torchrl 0.4, only a positive dim warns (0 does not: the test is `sample_dim > 0`)
    data = _trajectories(batch=6, steps=2)
    for crop in (RandomCropTensorDict(3, sample_dim=0), RandomCropTensorDict(3, sample_dim=-2)):
        out = crop(data)
        assert out.batch_size == (3, 2)
        # each column (a slice along the other dims) gets its own start, as in torchrl 0.4
        assert ((out["obs"] // 100).diff(dim=0) == 1).all()
        assert (out["obs"] % 100 == torch.arange(2)).all()
    with pytest.warns(UserWarning, match=re.escape(POSITIVE_DIM_WARNING[:40])):
        along_time = RandomCropTensorDict(2, sample_dim=1)
    assert (along_time(data) == data).all()


def test_random_crop_stays_within_the_masked_steps():
    torch.manual_seed(0)
    data = _trajectories(batch=3, steps=10)
    mask = torch.zeros(3, 10, dtype=torch.bool)
    mask[0, :5] = True
    mask[1, :] = True
    mask[2, :4] = True
    data["collector", "mask"] = mask
    crop = RandomCropTensorDict(4, mask_key=("collector", "mask"))
    starts = torch.stack([crop(data)["obs"][:, 0] % 100 for _ in range(300)])
    assert set(starts[:, 0].tolist()) == {0, 1}
    assert set(starts[:, 1].tolist()) == set(range(7))
    assert set(starts[:, 2].tolist()) == {0}
    assert crop(data)["collector", "mask"].all()


def test_random_crop_without_the_mask_entry_crops_every_step():
    # torchrl 0.4: a tensordict without the mask entry is cropped as if unmasked
    torch.manual_seed(0)
    crop = RandomCropTensorDict(4, mask_key="mask")
    starts = {int(v) for _ in range(100) for v in crop(_trajectories())["obs"][:, 0] % 100}
    assert starts == set(range(7))


def test_random_crop_errors_name_the_shapes():
    data = _trajectories(batch=3, steps=5)
    with pytest.raises(RuntimeError, match=re.escape(EMPTY_SHAPE_ERROR)):
        RandomCropTensorDict(2)(TensorDict(a=torch.zeros(3)))
    too_short = TOO_SHORT_ERROR.format(length=6, dim=-1, shape=torch.Size([3, 5]))
    with pytest.raises(RuntimeError, match=re.escape(too_short)):
        RandomCropTensorDict(6)(data)
    with pytest.raises(IndexError, match=r"sample_dim=-3 is not a dimension .* \(3, 5\)"):
        RandomCropTensorDict(2, sample_dim=-3)(data)
    for bad in (0, -1, 2.0, True):
        with pytest.raises(ValueError, match=re.escape(SUB_SEQ_LEN_ERROR.format(value=bad))):
            RandomCropTensorDict(bad)


def test_random_crop_mask_errors_name_the_key():
    data = _trajectories(batch=2, steps=5)
    data["mask"] = torch.ones(2, 5, 1, dtype=torch.bool)
    shape_error = MASK_SHAPE_ERROR.format(
        mask_shape=torch.Size([2, 5, 1]), key="mask", shape=torch.Size([2, 5])
    )
    with pytest.raises(ValueError, match=re.escape(shape_error)):
        RandomCropTensorDict(2, mask_key="mask")(data)
    data["mask"] = torch.ones(2, 5)
    with pytest.raises(
        TypeError, match=re.escape(MASK_DTYPE_ERROR.format(key="mask", dtype=torch.float32))
    ):
        RandomCropTensorDict(2, mask_key="mask")(data)
    mask = torch.ones(2, 5, dtype=torch.bool)
    mask[1, 3:] = False
    data["mask"] = mask
    short = MASK_TOO_SHORT_ERROR.format(length=4, shortest=3, key="mask")
    with pytest.raises(RuntimeError, match=re.escape(short)):
        RandomCropTensorDict(4, mask_key="mask")(data)


def test_random_crop_works_on_data_not_in_an_env():
    crop = Compose(RandomCropTensorDict(2), FiniteTensorDictCheck())
    assert crop(_trajectories()).batch_size == (3, 2)
    assert crop.transform_output_spec(Composite()) == Composite()
    with pytest.raises(RuntimeError, match=re.escape(ENV_ERROR)):
        TransformedEnv(CountEnv(batch_size=(4,)), RandomCropTensorDict(2))
    env = TransformedEnv(CountEnv(batch_size=(4,)), StepCounter())
    with pytest.raises(RuntimeError, match=re.escape(ENV_ERROR)):
        env.append_transform(RandomCropTensorDict(2))
    assert len(env.transform) == 1 and env.rollout(2).batch_size == (4, 2)  # left intact
    with pytest.raises(RuntimeError, match=re.escape(ENV_ERROR)):
        TransformedEnv(CountEnv(batch_size=(4,)), Compose(StepCounter(), RandomCropTensorDict(2)))


# ------------------------------------------------------------------------ BatchSizeTransform
def test_batch_size_transform_takes_one_of_batch_size_and_reshape_fn():
    with pytest.raises(ValueError, match=re.escape(ONE_OF_ERROR)):
        BatchSizeTransform()
    with pytest.raises(ValueError, match=re.escape(ONE_OF_ERROR)):
        BatchSizeTransform(batch_size=[2], reshape_fn=lambda d: d)
    assert BatchSizeTransform([5]).batch_size == torch.Size([5])
    assert BatchSizeTransform(batch_size=(2, 3)).batch_size == torch.Size([2, 3])


def test_batch_size_transform_follows_torchrl04_docstring_example():
    # torchrl 0.4's docstring: a stateless env gets batch size [5]; a reset_func taking `env`
    # builds the reset output from the transformed env's specs
    env = TransformedEnv(StatelessEnv(), BatchSizeTransform([5]))
    assert env.batch_size == torch.Size([5])
    assert env.rollout(10).shape == torch.Size([5, 10])
    seen = {}

    def reset_func(tensordict, tensordict_reset, env):
        seen["env"], seen["base"] = env, tensordict_reset.batch_size
        result = env.observation_spec.rand()
        result.update(env.full_done_spec.zero())
        assert result.batch_size != torch.Size([])
        return result

    env = TransformedEnv(
        StatelessEnv(), BatchSizeTransform([5], reset_func=reset_func, env_kwarg=True)
    )
    rollout = env.rollout(2)
    assert seen["env"] is env and seen["base"] == torch.Size([])
    assert rollout.batch_size == (5, 2) and rollout["next"].batch_size == (5, 2)
    shapes = {key: rollout.get(key).shape for key in rollout.keys(True, True)}
    assert shapes == {
        "action": (5, 2, 1),
        "done": (5, 2, 1),
        "observation": (5, 2, 3),
        "terminated": (5, 2, 1),
        ("next", "done"): (5, 2, 1),
        ("next", "observation"): (5, 2, 3),
        ("next", "reward"): (5, 2, 1),
        ("next", "terminated"): (5, 2, 1),
    }
    first = rollout["observation"][:, 0]
    assert (first != first[:1]).any()  # the reset_func's own (random) rows


def test_batch_size_transform_expands_specs_and_reset_outputs():
    base = StatelessEnv()
    env = TransformedEnv(base, BatchSizeTransform([2, 5]))
    check_env_specs(env)
    assert env.output_spec.shape == env.input_spec.shape == (2, 5)
    assert env.observation_spec["observation"].shape == (2, 5, 3)
    assert env.action_spec.shape == (2, 5, 1) and env.reward_spec.shape == (2, 5, 1)
    assert env.full_done_spec["done"].shape == (2, 5, 1)
    assert base.batch_size == () and base.observation_spec["observation"].shape == (3,)
    td = env.reset()
    assert td.batch_size == (2, 5)
    first = td["observation"][0, 0].clone()
    assert (td["observation"] == first).all()  # one base reset, expanded
    td["observation"][0, 0] += 1  # ... into copies that do not share memory
    assert (td["observation"][1, 1] == first).all()
    td = env.step(td.set("action", torch.full((2, 5, 1), 100.0)))
    assert td["next"].batch_size == (2, 5) and (td["next", "observation"] > 90).all()


def test_batch_size_transform_plain_reset_func_and_partial_resets():
    calls = []

    def reset_func(tensordict, tensordict_reset):
        calls.append((tensordict.batch_size, tensordict_reset.batch_size))
        return tensordict_reset.set(
            "observation", torch.full_like(tensordict_reset["observation"], 7.0)
        )

    env = TransformedEnv(
        StatelessEnv(), Compose(BatchSizeTransform([4], reset_func=reset_func), StepCounter(2))
    )
    check_env_specs(env)
    assert env.full_observation_spec["step_count"].shape == (4, 1)
    rollout = env.rollout(5, break_when_any_done=False)
    assert rollout["next", "step_count"][0].squeeze(-1).tolist() == [1, 2, 1, 2, 1]
    assert (rollout["observation"][:, 2] == 7.0).all()  # truncated after 2 steps: reset again
    assert calls[-1] == (torch.Size([4]), torch.Size([4]))


def test_batch_size_transform_refuses_unexpandable_and_locked_batches():
    def wrong_reset(tensordict, tensordict_reset):
        return tensordict_reset.expand(3).clone()

    env = TransformedEnv(StatelessEnv(), BatchSizeTransform([5], reset_func=wrong_reset))
    with pytest.raises(RuntimeError, match=re.escape(EXPAND_ERROR.format(got=(3,), expected=(5,)))):
        env.reset()
    # a batch-locked env's step ignores the batch it is given: its outputs cannot be
    # given another batch size
    env = TransformedEnv(CountEnv(), BatchSizeTransform([3]))
    td = env.reset()
    assert td.batch_size == (3,)
    with pytest.raises(
        RuntimeError, match=re.escape(STEP_BATCH_ERROR.format(got=(), expected=(3,)))
    ):
        env.step(td.set("action", torch.zeros(3, 1)))
    with pytest.raises(ValueError, match="expand"):
        TransformedEnv(CountEnv(batch_size=(2,)), BatchSizeTransform([3]))


@pytest.mark.parametrize(
    "reshape_fn, batch_size",
    [
        (lambda data: data.reshape(2, 3), (2, 3)),
        (lambda data: data.unflatten(0, (3, 2)), (3, 2)),
        (lambda data: data.unsqueeze(0), (1, 6)),
        (lambda data: data.reshape(6, 1).squeeze(-1).unsqueeze(-1).flatten(0, 1), (6,)),
    ],
)
def test_batch_size_transform_reshapes_env_batch_data_and_specs(reshape_fn, batch_size):
    base = BatchRecorder(batch_size=(6,), max_count=3)
    env = TransformedEnv(base, BatchSizeTransform(reshape_fn=reshape_fn))
    check_env_specs(env)
    assert env.batch_size == batch_size
    assert env.observation_spec["observation"].shape == (*batch_size, 3)
    assert env.action_spec.shape == (*batch_size, 1)
    assert env.full_done_spec["done"].shape == (*batch_size, 1)
    rollout = env.rollout(4, break_when_any_done=False)
    assert rollout.batch_size == (*batch_size, 4) and base.action_batch == (6,)
    counts = rollout["next", "observation"][..., 0].reshape(6, 4)
    assert counts.tolist() == [[1.0, 2.0, 3.0, 1.0]] * 6  # terminated at 3: reset, counted again


def test_batch_size_transform_partial_reset_reaches_the_right_sub_env():
    base = BatchRecorder(batch_size=(6,))
    env = TransformedEnv(base, BatchSizeTransform(reshape_fn=lambda d: d.unflatten(0, (2, 3))))
    td = env.reset()
    for _ in range(2):
        td = env.step(td.set("action", torch.zeros(2, 3, 1)))["next"].clone()
    reset = torch.zeros(2, 3, 1, dtype=torch.bool)
    reset[1, 0] = True
    out = env.reset(TensorDict({"_reset": reset}, batch_size=[2, 3]))
    assert base.reset_batch == (6,)  # the "_reset" flags reshaped to the base env's batch
    assert base.count.squeeze(-1).tolist() == [2, 2, 2, 0, 2, 2]
    assert out["observation"][..., 0].tolist() == [[2.0, 2.0, 2.0], [0.0, 2.0, 2.0]]


def test_batch_size_transform_forward_applies_reshape_fn_only():
    # torchrl 0.4: `forward` is `_call`: reshape_fn on data, the identity with batch_size
    td = TensorDict(a=torch.zeros(6, 2), batch_size=[6])
    assert BatchSizeTransform(reshape_fn=lambda d: d.reshape(2, 3))(td).batch_size == (2, 3)
    assert BatchSizeTransform([4, 6])(td) is td
    spec = Composite(a=Unbounded((6, 2)), shape=(6,))
    t = BatchSizeTransform(reshape_fn=lambda d: d.reshape(3, 2))
    assert t.transform_output_spec(spec)["a"].shape == (3, 2, 2)
    assert t.transform_env_batch_size(torch.Size([6])) == (3, 2)
    assert BatchSizeTransform([4, 6]).transform_env_batch_size(torch.Size([6])) == (4, 6)
