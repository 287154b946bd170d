"""LSTMModule / GRUModule: keys, modes, is_init, sequence replay, primer specs, errors."""

from __future__ import annotations

import re
import sys
import warnings

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule, TensorDictSequential
from torch import nn

from rlmodules import (
    MLP,
    GRUModule,
    LSTMModule,
    get_primer_specs_from_module,
    get_primers_from_module,
    recurrent_mode,
    set_recurrent_mode,
)
from rlspecs import Composite, Unbounded

pytestmark = pytest.mark.filterwarnings("error")


def _lstm(**kwargs):
    return LSTMModule(
        3, 5, in_keys=["obs", "h", "c"], out_keys=["y", ("next", "h"), ("next", "c")], **kwargs
    )


def _gru(**kwargs):
    return GRUModule(3, 5, in_keys=["obs", "h"], out_keys=["y", ("next", "h")], **kwargs)


def _step(batch=4, is_init=True, **entries):
    entries.setdefault("obs", torch.randn(batch, 3))
    return TensorDict(is_init=torch.full((batch, 1), is_init), batch_size=[batch], **entries)


def _is_init(rows, steps, starts):
    is_init = torch.zeros(rows, steps, 1, dtype=torch.bool)
    is_init[:, 0] = True
    for row, step in starts:
        is_init[row, step] = True
    return is_init


def _rollout_step_by_step(module, obs, is_init):
    """What a rollout does: one call per step, states carried from "next" and zeroed at resets.

    Returns the outputs and the data as stored (states at the root, next states under "next").
    """
    rows, steps = is_init.shape[:2]
    state = module.make_primer_spec().zero((rows,))
    outputs, stored = [], []
    for t in range(steps):
        td = TensorDict(obs=obs[:, t], is_init=is_init[:, t], batch_size=[rows]).update(state)
        module(td)
        stored.append(td.clone())
        outputs.append(td["y"])
        state = td["next"].clone()
        if t + 1 < steps:  # a reset primes zeros for the rows that start a new trajectory
            reset = is_init[:, t + 1, :, None]
            state = state.apply(lambda s, reset=reset: torch.where(reset, 0.0, s))
    return torch.stack(outputs, 1), torch.stack(stored, 1)


# ---- set_recurrent_mode


@pytest.mark.parametrize(
    ("mode", "expected"), [(True, True), (False, False), ("recurrent", True), ("Sequential", False)]
)
def test_set_recurrent_mode_sets_and_restores_the_mode(mode, expected):
    assert recurrent_mode() is None
    with set_recurrent_mode(mode):
        assert recurrent_mode() is expected
        with set_recurrent_mode(None):
            assert recurrent_mode() is None
        assert recurrent_mode() is expected
    assert recurrent_mode() is None


def test_set_recurrent_mode_decorates_functions():
    @set_recurrent_mode()
    def inner():
        return recurrent_mode()

    assert inner() is True and inner() is True
    assert recurrent_mode() is None


def test_set_recurrent_mode_rejects_other_values():
    with pytest.raises(ValueError, match=re.escape("Unsupported recurrent mode 'loop'")):
        set_recurrent_mode("loop")


# ---- keys and construction


def test_lstm_in_key_and_out_key_use_default_state_keys():
    module = LSTMModule(3, 5, in_key="obs", out_key="features")
    assert module.in_keys == ["obs", "recurrent_state_h", "recurrent_state_c", "is_init"]
    assert module.out_keys == [
        "features",
        ("next", "recurrent_state_h"),
        ("next", "recurrent_state_c"),
    ]


def test_gru_in_key_and_out_key_use_default_state_key():
    module = GRUModule(3, 5, in_key="obs", out_key="features")
    assert module.in_keys == ["obs", "recurrent_state", "is_init"]
    assert module.out_keys == ["features", ("next", "recurrent_state")]


def test_in_keys_may_end_with_is_init():
    assert (
        _gru().in_keys
        == GRUModule(3, 5, in_keys=["obs", "h", "is_init"], out_keys=["y", ("next", "h")]).in_keys
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"out_key": "y"}, "Either in_keys or in_key must be specified but not both or none."),
        (
            {"in_key": "x", "in_keys": ["x", "h", "c"], "out_key": "y"},
            "Either in_keys or in_key must be specified",
        ),
        ({"in_key": "x"}, "Either out_keys or out_key must be specified"),
        (
            {"in_keys": ["x", "h"], "out_key": "y"},
            "LSTMModule expects 3 inputs: a value, and two hidden states",
        ),
        (
            {"in_key": "x", "out_keys": ["y", ("next", "h")]},
            "LSTMModule expects 3 outputs: a value, and two hidden states",
        ),
        ({"in_key": "x", "out_key": "y", "batch_first": False}, "must have batch_first=True"),
        (
            {"in_key": "x", "out_key": "y", "python_based": True, "bidirectional": True},
            "python_based=True does not support bidirectional LSTMs.",
        ),
        ({"in_key": "x", "out_key": "y", "recurrent_backend": "scan"}, "must be 'pad' or 'auto'"),
    ],
    ids=["no-in", "in-twice", "no-out", "in-count", "out-count", "batch-first", "py-bidir", "scan"],
)
def test_lstm_module_rejects_bad_configurations(kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        LSTMModule(3, 5, **kwargs)


def test_lstm_module_needs_hidden_size_without_an_lstm():
    with pytest.raises(ValueError, match=re.escape("hidden_size must be passed.")):
        LSTMModule(input_size=3, in_key="x", out_key="y")


def test_lstm_instance_excludes_size_arguments():
    with pytest.raises(ValueError, match=re.escape("An LSTM instance cannot be passed")):
        LSTMModule(3, 5, lstm=nn.LSTM(3, 5, batch_first=True), in_key="x", out_key="y")


def test_gru_module_wraps_a_given_gru():
    gru = nn.GRU(3, 5, batch_first=True)
    module = GRUModule(gru=gru, in_key="x", out_key="y")
    assert module.gru is gru and module.rnn is gru


def test_gru_module_rejects_an_lstm_instance():
    with pytest.raises(TypeError, match=re.escape("gru must be a torch.nn.GRU, got LSTM.")):
        GRUModule(gru=nn.LSTM(3, 5, batch_first=True), in_key="x", out_key="y")


# ---- sequential mode


@pytest.mark.parametrize("make", [_lstm, _gru], ids=["lstm", "gru"])
def test_sequential_step_writes_output_and_next_states(make):
    module = make(num_layers=2)
    td = module(_step())
    assert td["y"].shape == (4, 5)
    for key in module.out_keys[1:]:
        assert td[key].shape == (4, 2, 5)


@pytest.mark.parametrize("make", [_lstm, _gru], ids=["lstm", "gru"])
def test_is_init_zeroes_the_incoming_state(make):
    module = make()
    td = _step(is_init=True)
    states = {key: torch.randn(4, 1, 5) for key in module.in_keys[1:-1]}
    with_state = module(td.clone().update(states))["y"]
    without_state = module(td.clone())["y"]
    torch.testing.assert_close(with_state, without_state)
    carried = module(_step(is_init=False, obs=td["obs"]).update(states))["y"]
    assert not torch.allclose(carried, without_state)


def test_sequential_step_matches_the_torch_layer():
    module = _lstm()
    h, c = torch.randn(4, 1, 5), torch.randn(4, 1, 5)
    td = module(_step(is_init=False, h=h, c=c))
    y, (h1, c1) = module.lstm(td["obs"].unsqueeze(1), (h.transpose(0, 1), c.transpose(0, 1)))
    torch.testing.assert_close(td["y"], y.squeeze(1))
    torch.testing.assert_close(td["next", "h"], h1.transpose(0, 1))
    torch.testing.assert_close(td["next", "c"], c1.transpose(0, 1))


def test_unbatched_step_runs():
    td = TensorDict(obs=torch.randn(3), is_init=torch.ones(1, dtype=torch.bool))
    td = _gru()(td)
    assert td["y"].shape == (5,) and td["next", "h"].shape == (1, 5)


def test_missing_is_init_raises_key_error_naming_it():
    with pytest.raises(KeyError, match=re.escape("LSTMModule needs the 'is_init' entry")):
        _lstm()(TensorDict(obs=torch.randn(2, 3), batch_size=[2]))


def test_missing_value_raises_key_error_naming_it():
    with pytest.raises(KeyError, match=re.escape("GRUModule could not find its input 'obs'")):
        _gru()(TensorDict(is_init=torch.ones(2, 1, dtype=torch.bool), batch_size=[2]))


def test_one_state_without_the_other_raises():
    with pytest.raises(
        RuntimeError, match=re.escape("found the recurrent state(s) ['h'] but not ['c']")
    ):
        _lstm()(_step(h=torch.zeros(4, 1, 5)))


def test_state_of_wrong_shape_raises_naming_key_and_shapes():
    with pytest.raises(
        ValueError,
        match=re.escape(
            "expects the recurrent state 'h' of shape (*batch, (1, 5)) with batch (4,), got (4, 5)"
        ),
    ):
        _gru()(_step(h=torch.zeros(4, 5)))


def test_value_of_wrong_size_raises():
    with pytest.raises(
        ValueError,
        match=re.escape("expects 'obs' of shape (*batch, 3) with batch (2,), got (2, 4)"),
    ):
        _gru()(
            TensorDict(
                obs=torch.zeros(2, 4), is_init=torch.ones(2, 1, dtype=torch.bool), batch_size=[2]
            )
        )


# ---- recurrent mode


@pytest.mark.parametrize("python_based", [False, True], ids=["torch", "python"])
@pytest.mark.parametrize("make", [_lstm, _gru], ids=["lstm", "gru"])
def test_recurrent_mode_replays_a_rollout_with_resets(make, python_based):
    torch.manual_seed(0)
    module = make(num_layers=2, python_based=python_based)
    obs = torch.randn(3, 7, 3)
    is_init = _is_init(3, 7, [(0, 3), (1, 5), (2, 1), (2, 2)])
    outputs, data = _rollout_step_by_step(module, obs, is_init)
    with set_recurrent_mode(True):
        replay = module(data.exclude("y", "next"))
    torch.testing.assert_close(replay["y"], outputs)


def test_recurrent_mode_writes_final_states_at_trajectory_ends_only():
    module = _gru()
    obs = torch.randn(2, 6, 3)
    is_init = _is_init(2, 6, [(0, 4)])
    _, data = _rollout_step_by_step(module, obs, is_init)
    with set_recurrent_mode(True):
        replay = module(data.exclude("y", "next"))
    ends = torch.zeros(2, 6, dtype=torch.bool)
    ends[0, 3] = ends[0, 5] = ends[1, 5] = True
    torch.testing.assert_close(replay["next", "h"][ends], data["next", "h"][ends])
    assert (replay["next", "h"][~ends] == 0).all()


def test_recurrent_mode_without_resets_continues_from_stored_state():
    module = _lstm()
    obs = torch.randn(2, 5, 3)
    is_init = _is_init(2, 5, [])
    outputs, data = _rollout_step_by_step(module, obs, is_init)
    with set_recurrent_mode(True):
        torch.testing.assert_close(module(data.exclude("y", "next"))["y"], outputs)


def test_recurrent_mode_flattens_leading_batch_dims():
    module = _gru()
    td = TensorDict(
        obs=torch.randn(2, 3, 4, 3),
        is_init=_is_init(6, 4, [(1, 2)]).reshape(2, 3, 4, 1),
        batch_size=[2, 3, 4],
    )
    flat = TensorDict(
        obs=td["obs"].reshape(6, 4, 3), is_init=td["is_init"].reshape(6, 4, 1), batch_size=[6, 4]
    )
    with set_recurrent_mode(True):
        torch.testing.assert_close(module(td)["y"].reshape(6, 4, 5), module(flat)["y"])


def test_recurrent_mode_backpropagates_into_the_layer():
    module = _lstm()
    td = TensorDict(obs=torch.randn(2, 6, 3), is_init=_is_init(2, 6, [(0, 2)]), batch_size=[2, 6])
    with set_recurrent_mode(True):
        module(td)["y"].sum().backward()
    assert module.lstm.weight_ih_l0.grad.abs().sum() > 0


def test_recurrent_mode_needs_a_time_dim():
    with (
        set_recurrent_mode(True),
        pytest.raises(
            ValueError, match="requires the input tensordict to have at least one batch dim"
        ),
    ):
        _gru()(TensorDict(obs=torch.randn(3), is_init=torch.ones(1, dtype=torch.bool)))


def test_recurrent_mode_defaults_to_the_constructor_and_yields_to_the_context():
    module = _gru(default_recurrent_mode=True)
    assert module.recurrent_mode is True and _gru().recurrent_mode is False
    with set_recurrent_mode(False):
        assert module.recurrent_mode is False


def test_recurrent_mode_attribute_is_read_only():
    with pytest.raises(RuntimeError, match=re.escape("recurrent_mode cannot be changed in-place")):
        _gru().recurrent_mode = True


def test_temporal_mode_is_gone():
    with pytest.raises(
        RuntimeError, match=re.escape("temporal_mode is deprecated, use recurrent_mode instead.")
    ):
        _ = _gru().temporal_mode


def test_set_recurrent_mode_method_returns_a_copy_sharing_the_layer():
    module = _lstm()
    recurrent = module.set_recurrent_mode(True)
    assert recurrent is not module and recurrent.lstm is module.lstm
    assert recurrent.recurrent_mode and not module.recurrent_mode
    assert recurrent.set_recurrent_mode(True) is recurrent
    assert recurrent.in_keys == module.in_keys and recurrent.out_keys == module.out_keys


@pytest.mark.parametrize("make", [_lstm, _gru], ids=["lstm", "gru"])
def test_python_and_cudnn_layers_give_the_same_results(make):
    module = make(num_layers=2)
    td = TensorDict(obs=torch.randn(2, 5, 3), is_init=_is_init(2, 5, [(1, 3)]), batch_size=[2, 5])
    with set_recurrent_mode(True):
        reference = module(td.clone())["y"]
        assert module.make_python_based() is module
        assert type(module.rnn).__name__.startswith("Python")
        torch.testing.assert_close(module(td.clone())["y"], reference)
        module.make_cudnn_based()
        assert type(module.rnn) in (nn.LSTM, nn.GRU)
        torch.testing.assert_close(module(td.clone())["y"], reference)


# ---- primers


def test_lstm_primer_spec_holds_both_states():
    spec = LSTMModule(3, 8, num_layers=2, in_key="obs", out_key="out").make_primer_spec()
    assert isinstance(spec, Composite)
    assert set(spec.keys()) == {"recurrent_state_h", "recurrent_state_c"}
    assert spec["recurrent_state_h"] == Unbounded(shape=(2, 8))
    assert spec["recurrent_state_c"] == Unbounded(shape=(2, 8))


def test_primer_spec_follows_dtype_directions_and_projection():
    module = LSTMModule(
        3, 8, proj_size=4, bidirectional=True, in_key="obs", out_key="out", device="cpu"
    ).to(torch.float64)
    spec = module.make_primer_spec()
    assert spec["recurrent_state_h"].shape == (2, 4) and spec["recurrent_state_c"].shape == (2, 8)
    assert spec["recurrent_state_h"].dtype == torch.float64


def test_primer_spec_zero_feeds_a_bidirectional_projected_lstm():
    module = LSTMModule(3, 8, proj_size=4, bidirectional=True, in_key="obs", out_key="out")
    td = _step(batch=2).update(module.make_primer_spec().zero((2,)))
    with warnings.catch_warnings():  # torch's CPU kernel notes it has no oneDNN path for this
        warnings.filterwarnings("ignore", message="LSTM with projections is not supported")
        assert module(td)["out"].shape == (2, 8)


def test_primer_spec_needs_next_state_keys():
    module = GRUModule(3, 5, in_keys=["obs", "h"], out_keys=["y", "h_out"])
    with pytest.raises(
        RuntimeError, match=re.escape("the out_keys should be named after ('next', <in_key>)")
    ):
        module.make_primer_spec()


def test_primer_specs_of_a_policy_gather_every_recurrent_submodule():
    policy = TensorDictSequential(
        LSTMModule(3, 8, in_key="obs", out_key="features"),
        GRUModule(8, 4, in_keys=["features", "g"], out_keys=["out", ("next", "g")]),
        TensorDictModule(
            MLP(in_features=4, out_features=2, num_cells=[]), in_keys=["out"], out_keys=["action"]
        ),
    )
    specs = get_primer_specs_from_module(policy)
    assert set(specs.keys()) == {"recurrent_state_h", "recurrent_state_c", "g"}
    assert specs["g"].shape == (1, 4)


def test_primer_specs_with_conflicting_keys_raise():
    policy = TensorDictSequential(
        GRUModule(3, 8, in_key="obs", out_key="a"), GRUModule(8, 4, in_key="a", out_key="b")
    )
    with pytest.raises(
        ValueError, match=re.escape("need a primer for 'recurrent_state' with different specs")
    ):
        get_primer_specs_from_module(policy)


def test_make_tensordict_primer_without_rltransforms_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "rltransforms", None)  # makes `import rltransforms` fail
    with pytest.raises(
        ImportError,
        match=re.escape(
            'LSTMModule.make_tensordict_primer() needs rltransforms: pip install "rlmodules[transforms]"'
        ),
    ):
        _lstm().make_tensordict_primer()


def test_get_primers_from_module_without_primers_warns_and_returns_none():
    with pytest.warns(UserWarning, match="No primers found in the module."):
        assert get_primers_from_module(MLP(in_features=2, out_features=2, num_cells=[])) is None


def test_get_primers_from_module_strict_raises_and_lenient_warns():
    module = GRUModule(3, 5, in_keys=["obs", "h"], out_keys=["y", "h_out"])
    with pytest.raises(RuntimeError, match="have compatible names"):
        get_primers_from_module(module)
    with pytest.warns(
        UserWarning, match="Could not build tensordict primers from these submodules: GRUModule"
    ):
        assert get_primers_from_module(module, warn=False, strict=False) is None


def test_make_tensordict_primer_builds_rltransforms_primers():
    """Needs rltransforms (ImportError until the package exists)."""
    from rltransforms import Compose, TensorDictPrimer

    lstm = LSTMModule(3, 8, num_layers=2, in_key="obs", out_key="features")
    primer = lstm.make_tensordict_primer()
    assert isinstance(primer, TensorDictPrimer)
    assert primer.primers == lstm.make_primer_spec()
    primed = primer(TensorDict(batch_size=[4]))
    assert primed["recurrent_state_h"].shape == (4, 2, 8)
    assert (primed["recurrent_state_c"] == 0).all()
    assert isinstance(get_primers_from_module(lstm), TensorDictPrimer)
    gru = GRUModule(8, 4, in_keys=["features", "g"], out_keys=["out", ("next", "g")])
    assert isinstance(get_primers_from_module(TensorDictSequential(lstm, gru)), Compose)
