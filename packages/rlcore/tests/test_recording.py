"""Rollout recording: lists vs buffers (and derived roots, fast stacks) return the same thing.

Every scenario runs under the plain per-leaf lists (thresholds out of reach: today's path),
under buffers for every leaf with every root derived and every stack fast (thresholds at 0),
and under the default switch-over; the results must be identical bit for bit, down to the
dtype, strides, names and lazy stacks.
"""

from __future__ import annotations

import io
import mmap
import pickle

import pytest
import torch
from _rlcore_envs import CountingEnv, DifferentiableEnv, HeterogeneousEnv, NestedCountingEnv
from tensordict import LazyStackedTensorDict, TensorDict, TensorDictBase, is_tensor_collection
from tensordict.nn import TensorDictModule
from tensordict.utils import is_non_tensor
from torch import nn

import rlcore._recording as recording
from rlcore import EnvBase, _memory
from rlspecs import Bounded, Categorical, Composite, Unbounded

THRESHOLDS = ("ROW_MIN_BYTES", "STEP_MIN_BYTES", "DERIVE_MIN_BYTES", "FLOAT_VIEW_MIN_BYTES")
STRATEGIES = {
    "lists": dict.fromkeys(THRESHOLDS, 2**62),
    "lists, derived, fast stacks": {**dict.fromkeys(THRESHOLDS, 0), "STEP_MIN_BYTES": 2**62},
    "buffers": dict.fromkeys(THRESHOLDS, 0),
    "default": {},
}


class WideEnv(EnvBase):
    """``obs`` of shape ``[*batch, *row]`` (count + column index, as ``dtype``), an optional
    nested ``("agents", "state")``; sub-env ``i`` is done every ``period + i`` steps."""

    def __init__(
        self,
        row: tuple[int, ...] = (16,),
        dtype: torch.dtype = torch.float32,
        period: int = 10**6,
        nested: bool = False,
        batch_size: tuple[int, ...] = (),
    ) -> None:
        super().__init__(batch_size=batch_size)
        batch = self.batch_size
        obs = {"obs": Unbounded((*batch, *row), dtype=dtype)}
        if nested:
            obs["agents"] = Composite(state=Unbounded((*batch, 2, 5)), shape=(*batch, 2))
        self.observation_spec = Composite(obs, shape=batch)
        self.action_spec = Bounded(-1, 1, shape=(*batch, 1))
        self.reward_spec = Unbounded((*batch, 1))
        self.done_spec = Categorical(2, shape=(*batch, 1), dtype=torch.bool)
        self.row, self.obs_dtype, self.nested = row, dtype, nested
        self.steps = torch.zeros(batch, dtype=torch.int64)
        self.limit = period + torch.arange(batch.numel()).reshape(batch)

    def _set_seed(self, seed):
        pass

    def _data(self) -> dict:
        batch, row = self.batch_size, self.row
        count = self.steps.reshape(*batch, *([1] * len(row)))
        columns = torch.arange(torch.Size(row).numel()).reshape(row)
        done = (self.steps >= self.limit).unsqueeze(-1)
        data = {"obs": (count + columns).to(self.obs_dtype), "done": done, "terminated": done}
        if self.nested:
            state = self.steps.reshape(*batch, 1, 1).expand(*batch, 2, 5).float()
            data["agents"] = TensorDict({"state": state}, (*batch, 2))
        return data

    def _reset(self, tensordict):
        reset = None if tensordict is None else tensordict.get("_reset", None)
        if reset is None:
            self.steps.zero_()
        else:
            self.steps[reset.reshape(self.steps.shape)] = 0
        return TensorDict(self._data(), self.batch_size)

    def _step(self, tensordict):
        self.steps += 1
        data = self._data()
        data["terminated"] = data["done"].clone()
        data["reward"] = tensordict.get("action") * 2
        return TensorDict(data, self.batch_size)


def assert_identical(a, b) -> None:
    """Same type, batch size, names, device, keys; leaves of same dtype, shape, strides, bits."""
    assert type(a) is type(b)
    if is_non_tensor(a):
        assert a.tolist() == b.tolist()
        return
    assert a.batch_size == b.batch_size
    assert a.device == b.device
    assert a.names == b.names
    if isinstance(a, LazyStackedTensorDict):
        assert a.stack_dim == b.stack_dim
        assert len(a.tensordicts) == len(b.tensordicts)
        for x, y in zip(a.tensordicts, b.tensordicts):
            assert_identical(x, y)
        return
    assert sorted(a.keys()) == sorted(b.keys())
    for key in a.keys():
        x, y = a.get(key), b.get(key)
        if is_tensor_collection(x):
            assert_identical(x, y)
            continue
        assert (x.dtype, x.shape, x.stride(), x.device) == (y.dtype, y.shape, y.stride(), y.device)
        assert x.is_contiguous() and x.requires_grad == y.requires_grad
        assert torch.equal(x.flatten().view(torch.uint8), y.flatten().view(torch.uint8)), key


@pytest.fixture
def run(monkeypatch):
    """``run(strategy, make_env, **rollout_kwargs)`` -> (rollout, strategies recorded)."""
    used: list[str] = []
    result = recording.Recorder.result

    def spy(self, return_contiguous):
        used.append(self.strategy)
        return result(self, return_contiguous)

    monkeypatch.setattr(recording.Recorder, "result", spy)
    defaults = {name: getattr(recording, name) for name in THRESHOLDS}

    def go(strategy, make_env, seed=0, **kwargs):
        for name, value in {**defaults, **STRATEGIES[strategy]}.items():
            monkeypatch.setattr(recording, name, value)
        used.clear()
        torch.manual_seed(seed)
        env = make_env()
        out = env.rollout(**kwargs)
        return out, list(used)

    return go


def count_policy(td: TensorDictBase) -> TensorDictBase:
    td["action"] = torch.ones(*td.batch_size, 1, dtype=torch.int8)
    return td


def new_td_policy(td: TensorDictBase) -> TensorDictBase:
    return TensorDict({"action": torch.full((*td.batch_size, 1), 0.5)}, td.batch_size)


def scale_obs_callback(env, td) -> None:
    td["next", "obs"].mul_(2)  # in place, after recording: lists see it, so must buffers


SCENARIOS = {
    "counting ()": (lambda: CountingEnv(max_steps=3), dict(max_steps=10, policy=count_policy)),
    "counting (3, 2) no break": (
        lambda: CountingEnv(max_steps=2, batch_size=(3, 2)),
        dict(max_steps=9, policy=count_policy, break_when_any_done=False),
    ),
    "wide (64,) float": (
        lambda: WideEnv(batch_size=(64,)),
        dict(max_steps=20, break_when_any_done=False),
    ),
    "wide (8,) int64 partial resets": (
        lambda: WideEnv(dtype=torch.int64, period=3, batch_size=(8,)),
        dict(max_steps=20, break_when_any_done=False),
    ),
    "wide (4, 3) uint8 images": (
        lambda: WideEnv(row=(3, 8, 8), dtype=torch.uint8, period=5, batch_size=(4, 3)),
        dict(max_steps=12, break_when_any_done=False),
    ),
    "wide () large leaf, nested": (
        lambda: WideEnv(row=(4096,), nested=True),
        dict(max_steps=7, break_when_any_done=False),
    ),
    "wide (5,) int16 stop at 33": (
        lambda: WideEnv(dtype=torch.int16, period=33, batch_size=(5,)),
        dict(max_steps=100),
    ),
    "wide (5,) stop at 32": (lambda: WideEnv(period=32, batch_size=(5,)), dict(max_steps=100)),
    "wide (5,) stop at 70": (lambda: WideEnv(period=70, batch_size=(5,)), dict(max_steps=100)),
    "wide (5,) max_steps 3": (lambda: WideEnv(batch_size=(5,)), dict(max_steps=3)),
    "wide new-td policy": (
        lambda: WideEnv(batch_size=(6,)),
        dict(max_steps=5, policy=new_td_policy, break_when_any_done=False),
    ),
    "wide in-place callback": (
        lambda: WideEnv(batch_size=(6,), period=2),
        dict(max_steps=8, callback=scale_obs_callback, break_when_any_done=False),
    ),
    "nested counting": (
        lambda: NestedCountingEnv(max_steps=1, batch_size=(2,)),
        dict(max_steps=6, break_when_any_done=False),
    ),
    "heterogeneous, lazy": (
        lambda: HeterogeneousEnv(max_steps=1, batch_size=(2,)),
        dict(max_steps=5, break_when_any_done=False, return_contiguous=False),
    ),
}


@pytest.mark.parametrize("strategy", [s for s in STRATEGIES if s != "lists"])
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_strategies_return_identical_rollouts(run, scenario, strategy):
    make_env, kwargs = SCENARIOS[scenario]
    expected, used = run("lists", make_env, **kwargs)
    assert used in (["lists"], ["tensordicts"])
    out, used = run(strategy, make_env, **kwargs)
    assert_identical(out, expected)
    if strategy == "buffers" and "lazy" not in scenario:
        assert used == ["buffers"]


def test_auto_reset_steps_are_not_derived(run):
    """Sub-envs reset at different steps: the root observation is new there, not ``next``'s."""
    make_env = lambda: WideEnv(period=2, batch_size=(3,))  # noqa: E731
    out, used = run("buffers", make_env, max_steps=9, break_when_any_done=False)
    assert used == ["buffers"]
    assert out["obs"][0, :, 0].tolist() == [0.0, 1.0] * 4 + [0.0]
    assert out["next", "obs"][0, :, 0].tolist() == [1.0, 2.0] * 4 + [1.0]
    assert out["obs"][1, :, 0].tolist() == [0.0, 1.0, 2.0] * 3
    assert out["next", "obs"][1, :, 0].tolist() == [1.0, 2.0, 3.0] * 3
    assert_identical(out, run("lists", make_env, max_steps=9, break_when_any_done=False)[0])


def test_default_switch_over_buffers_wide_leaves_only(run):
    wide = lambda: WideEnv(row=(256,), batch_size=(512,))  # noqa: E731  rows 1 KiB, 512 KiB/step
    narrow = lambda: WideEnv(row=(3,), batch_size=(16384,))  # noqa: E731  rows of 12 B
    assert run("default", wide, max_steps=3)[1] == ["buffers"]
    assert run("default", narrow, max_steps=3)[1] == ["lists"]


ROWS_AT_MIN = recording.STEP_MIN_BYTES // recording.ROW_MIN_BYTES
FLOATS_AT_MIN = recording.ROW_MIN_BYTES // 4


@pytest.mark.parametrize(
    ("shape", "dtype", "expected"),
    [
        ((ROWS_AT_MIN, FLOATS_AT_MIN), torch.float32, True),  # both at their minimum
        ((ROWS_AT_MIN * 2, FLOATS_AT_MIN - 1), torch.float32, False),  # rows too short
        ((ROWS_AT_MIN - 1, FLOATS_AT_MIN), torch.float32, False),  # step too small
        ((ROWS_AT_MIN, FLOATS_AT_MIN // 2), torch.float64, True),
        ((16384, 3), torch.float32, False),  # the [*batch, 3] observations of bench_scale
        ((65536, 1), torch.int64, False),
        ((64, 3, 84, 84), torch.uint8, True),  # pixels
    ],
)
def test_buffered_switch_over(shape, dtype, expected):
    assert recording.buffered(torch.zeros(shape, dtype=dtype), batch_dims=1) is expected


def test_buffered_needs_a_cpu_leaf_without_grad():
    size = recording.STEP_MIN_BYTES // 4
    assert recording.buffered(torch.zeros(size), batch_dims=0)
    assert not recording.buffered(torch.zeros(size, requires_grad=True), batch_dims=0)
    assert not recording.buffered(torch.zeros(size, device="meta"), batch_dims=0)


def test_step_changing_shape_falls_back_like_lists(run):
    def policy(td):
        td["action"] = torch.zeros(*td.batch_size, 1)
        width = 4 if int(td["obs"][0, 0]) < 2 else 5
        td["growing"] = torch.zeros(*td.batch_size, width)
        return td

    make_env = lambda: WideEnv(batch_size=(2,))  # noqa: E731
    with pytest.raises(RuntimeError):
        run("lists", make_env, max_steps=4, policy=policy)
    with pytest.raises(RuntimeError):
        run("buffers", make_env, max_steps=4, policy=policy)
    expected, _ = run("lists", make_env, max_steps=4, policy=policy, return_contiguous=False)
    out, _ = run("buffers", make_env, max_steps=4, policy=policy, return_contiguous=False)
    assert_identical(out, expected)
    assert out[..., 3]["growing"].shape == (2, 5)


def test_step_changing_dtype_promotes_like_lists(run):
    def policy(td):
        td["action"] = torch.zeros(*td.batch_size, 1)
        dtype = torch.float32 if int(td["obs"][0, 0]) < 2 else torch.float64
        td["extra"] = torch.full((*td.batch_size, 2), 1 / 3, dtype=dtype)
        return td

    make_env = lambda: WideEnv(batch_size=(2,))  # noqa: E731
    expected, _ = run("lists", make_env, max_steps=4, policy=policy)
    out, used = run("buffers", make_env, max_steps=4, policy=policy)
    assert used == ["lists"]  # the buffers were given up at the step that changed
    assert out["extra"].dtype == torch.float64
    assert_identical(out, expected)


def test_keys_changing_falls_back_to_tensordicts(run):
    def policy(td):
        td["action"] = torch.zeros(*td.batch_size, 1)
        if int(td["obs"][0, 0]) == 1:
            td["once"] = torch.zeros(*td.batch_size, 1)
        return td

    make_env = lambda: WideEnv(batch_size=(2,))  # noqa: E731
    expected, _ = run("lists", make_env, max_steps=3, policy=policy, return_contiguous=False)
    out, used = run("buffers", make_env, max_steps=3, policy=policy, return_contiguous=False)
    assert used == ["tensordicts"]
    assert_identical(out, expected)


@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_gradients_flow_whatever_the_strategy(run, strategy):
    policy = TensorDictModule(nn.Linear(3, 3), in_keys=["observation"], out_keys=["action"])
    torch.manual_seed(0)
    out, used = run(strategy, DifferentiableEnv, max_steps=5, policy=policy)
    assert used == ["lists"]
    grads = torch.autograd.grad(out["next", "reward"].sum(), list(policy.parameters()))
    assert all(g.abs().sum() > 0 for g in grads)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16])
def test_fast_stack_of_integers_keeps_every_bit(monkeypatch, dtype):
    """Integers go through a float view: NaN and subnormal bit patterns must come out intact."""
    monkeypatch.setattr(recording, "FLOAT_VIEW_MIN_BYTES", 0)
    info = torch.iinfo(dtype)
    patterns = torch.tensor([info.min, info.max, -1, 0, 1, info.max // 3], dtype=dtype)
    if dtype is torch.int64:  # quiet/signalling NaN payloads and a subnormal of float64
        bits = [0x7FF8000000000001, 0x7FF0000000000001, -0x0008000000000001, 3]
        patterns = torch.cat([patterns, torch.tensor(bits, dtype=dtype)])
    values = [patterns.roll(i).reshape(2, -1) for i in range(5)]
    flush = torch.set_flush_denormal(True)
    try:
        for dim in (0, 1, 2):
            out = recording._stack(values, dim)
            assert out.dtype == dtype
            assert torch.equal(out, torch.stack(values, dim))
    finally:
        torch.set_flush_denormal(False) if flush else None


def test_fast_stack_handles_strided_mixed_and_grad_inputs(monkeypatch):
    monkeypatch.setattr(recording, "FLOAT_VIEW_MIN_BYTES", 0)
    strided = [torch.arange(12, dtype=torch.int64).reshape(3, 4)[:, ::2] + i for i in range(3)]
    assert torch.equal(recording._stack(strided, 1), torch.stack(strided, 1))
    mixed = [torch.ones(3), torch.ones(3, dtype=torch.float64)]
    assert recording._stack(mixed, 0).dtype == torch.float64
    leaf = torch.ones(3, requires_grad=True)
    stacked = recording._stack([leaf * 2, leaf * 3], 0)
    (grad,) = torch.autograd.grad(stacked.sum(), leaf)
    assert grad.tolist() == [5.0, 5.0, 5.0]


def test_memory_empty_small_or_not_cpu_is_torch_empty():
    small = _memory.empty((_memory.MIN_BYTES // 4 - 1,), torch.float32)
    assert small.numel() == _memory.MIN_BYTES // 4 - 1 and small.untyped_storage().resizable()
    meta = _memory.empty((2**21,), torch.float32, torch.device("meta"))
    assert meta.device.type == "meta"


def test_memory_mapped_tensor_behaves_like_a_cpu_tensor(monkeypatch):
    """The huge-page path: exact storage, 2 MiB aligned, pickles, saves, shares, frees."""
    mapped = hasattr(mmap, "MADV_HUGEPAGE") and hasattr(mmap, "MAP_PRIVATE")
    monkeypatch.setattr(_memory, "huge_pages_on_request", lambda: mapped)
    monkeypatch.setattr(_memory, "MIN_BYTES", _memory.HUGE_PAGE)
    shape = (_memory.HUGE_PAGE // 8 // 3 + 1, 3)
    tensor = _memory.empty(shape, torch.float64)
    assert tensor.shape == shape and tensor.dtype == torch.float64 and tensor.is_contiguous()
    nbytes = tensor.numel() * 8
    assert tensor.untyped_storage().nbytes() == nbytes
    assert tensor.untyped_storage().resizable() is not mapped
    if mapped:
        assert tensor.data_ptr() % _memory.HUGE_PAGE == 0
    tensor.copy_(torch.arange(tensor.numel(), dtype=torch.float64).reshape(shape))
    assert torch.equal(pickle.loads(pickle.dumps(tensor)), tensor)
    buffer = io.BytesIO()
    torch.save(tensor, buffer)
    assert buffer.tell() < nbytes + 4096
    buffer.seek(0)
    assert torch.equal(torch.load(buffer), tensor)
    view = tensor[1:3]
    del tensor
    assert view[0, 0].item() == 3.0  # a view keeps the mapping alive
    shared = _memory.empty(shape, torch.float64).fill_(2.0).share_memory_()
    assert shared.is_shared() and bool((shared == 2.0).all())


def test_rollout_outputs_on_huge_pages_share_save_and_pickle(run, monkeypatch):
    mapped = hasattr(mmap, "MADV_HUGEPAGE") and hasattr(mmap, "MAP_PRIVATE")
    monkeypatch.setattr(_memory, "huge_pages_on_request", lambda: mapped)
    monkeypatch.setattr(_memory, "MIN_BYTES", _memory.HUGE_PAGE)
    make_env = lambda: WideEnv(row=(1024,), batch_size=(64,))  # noqa: E731  2.6 MB per leaf
    out, _ = run("default", make_env, max_steps=10, break_when_any_done=False)
    obs = out["next", "obs"]
    assert obs.untyped_storage().resizable() is not mapped
    expected, _ = run("lists", make_env, max_steps=10, break_when_any_done=False)
    assert_identical(out, expected)
    assert_identical(pickle.loads(pickle.dumps(out)), expected)
    buffer = io.BytesIO()
    torch.save(out, buffer)
    buffer.seek(0)
    assert_identical(torch.load(buffer, weights_only=False), expected)
    shared = out.share_memory_()
    assert shared["next", "obs"].is_shared()
    assert_identical(shared, expected)


@pytest.mark.parametrize("strategy", ["buffers", "lists, derived, fast stacks"])
def test_chained_rollouts_without_auto_reset_are_identical(run, strategy):
    def chain(name):
        env = WideEnv(period=3, batch_size=(4,))
        root, outs = env.reset(), []
        for _ in range(3):
            make = lambda: env  # noqa: E731  the same env, continued
            out, _ = run(name, make, max_steps=5, auto_reset=False, tensordict=root)
            outs.append(out)
            root = env.maybe_reset(env._step_mdp(out[..., -1].clone()))
        return outs

    for out, expected in zip(chain(strategy), chain("lists")):
        assert_identical(out, expected)
