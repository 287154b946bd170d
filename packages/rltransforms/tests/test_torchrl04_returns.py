"""Returns of stored trajectories as torchrl 0.4 computes them: Reward2GoTransform on the data
0.4 accepts, and MultiStepTransform (n-step returns as a replay buffer stores batches)."""

from __future__ import annotations

import re

import pytest
import torch
from _transform_envs import CountEnv
from tensordict import TensorDict

from rltransforms import Compose, MultiStepTransform, Reward2GoTransform, TransformedEnv
from rltransforms._multi_step_transform import N_STEPS_ERROR, multi_step
from rltransforms._returns import NO_EPISODE_END_ERROR

pytestmark = pytest.mark.filterwarnings("error")


def _r2g_reference(reward: torch.Tensor, done: torch.Tensor, gamma: float) -> torch.Tensor:
    """Reward-to-go along the last dim; the data end closes the last trajectory."""
    out = torch.zeros_like(reward)
    acc = torch.zeros_like(reward[..., -1])
    for t in range(reward.shape[-1] - 1, -1, -1):
        acc = reward[..., t] + gamma * torch.where(done[..., t], 0.0, acc)
        out[..., t] = acc
    return out


# ------------------------------------------------------------------------ Reward2GoTransform
def test_reward2go_accepts_trajectories_cut_by_the_end_of_the_data():
    # torchrl 0.4 needs one done per trajectory, not one at its end: the steps after the last
    # done sum up to the last step
    done = torch.tensor([False, False, True, False, False]).unsqueeze(-1)
    td = TensorDict({"next": {"reward": torch.ones(5, 1), "done": done}}, [5])
    out = Reward2GoTransform(gamma=0.5, out_keys=["r2g"]).inv(td)
    assert out["r2g"].squeeze(-1).tolist() == [1.75, 1.5, 1.0, 1.5, 1.0]


@pytest.mark.parametrize("batch_size", [[3, 6], [3], []], ids=["B,T", "B", "none"])
def test_reward2go_reads_time_at_dim_minus_2_of_the_done_flag(batch_size):
    torch.manual_seed(0)
    reward = torch.randn(3, 6, 1)
    done = torch.zeros(3, 6, 1, dtype=torch.bool)
    done[:, 2] = True
    done[1, 4] = True
    td = TensorDict({"next": {"reward": reward, "done": done}}, batch_size)
    out = Reward2GoTransform(gamma=0.9, out_keys=["r2g"]).inv(td)
    expected = _r2g_reference(reward.squeeze(-1), done.squeeze(-1), 0.9).unsqueeze(-1)
    torch.testing.assert_close(out["r2g"], expected)


@pytest.mark.parametrize("done_key", ["terminated", ("agent", "done")])
def test_reward2go_done_key_on_batch_time_data(done_key):
    done = torch.zeros(2, 4, 1, dtype=torch.bool)
    done[0, 1] = done[1, 3] = True
    path = done_key if isinstance(done_key, tuple) else (done_key,)
    td = TensorDict({("next", "reward"): torch.ones(2, 4, 1), ("next", *path): done}, [2, 4])
    out = Reward2GoTransform(out_keys=["r2g"], done_key=done_key).inv(td)
    assert out["r2g"].squeeze(-1).tolist() == [[2.0, 1.0, 2.0, 1.0], [4.0, 3.0, 2.0, 1.0]]


def test_reward2go_refuses_a_trajectory_without_any_done():
    done = torch.zeros(2, 4, 1, dtype=torch.bool)
    done[0, 1] = True
    td = TensorDict({"next": {"reward": torch.ones(2, 4, 1), "done": done}}, [2, 4])
    message = NO_EPISODE_END_ERROR.format(key=("next", "done"))
    with pytest.raises(RuntimeError, match=re.escape(message)):
        Reward2GoTransform().inv(td)
    with pytest.raises(RuntimeError, match="^No episode ends found to calculate the reward to go"):
        Reward2GoTransform().inv(td)


# ------------------------------------------------------------------------ MultiStepTransform
def _transitions(batch: list[int], length: int, p_done: float = 0.2, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    shape = (*batch, length)
    obs = torch.randn(*shape, 2, generator=generator)
    return TensorDict(
        {
            "obs": obs,
            "next": {
                "obs": obs + 100,
                "reward": torch.randn(*shape, 1, generator=generator),
                "done": torch.rand(*shape, 1, generator=generator) < p_done,
            },
        },
        shape,
    )


def _multi_step_reference(td: TensorDict, n_steps: int, gamma: float) -> dict:
    """Step by step, for `[T]` data: the n-step reward, next obs and bookkeeping entries."""
    reward, done = td["next", "reward"].squeeze(-1), td["next", "done"].squeeze(-1)
    length = td.shape[-1]
    out = {"reward": [], "obs": [], "steps": [], "gamma": [], "nonterminal": []}
    for t in range(length):
        end = t
        while end < length - 1 and not done[end]:
            end += 1
        ahead = min(n_steps - 1, end - t)
        out["reward"].append(sum(gamma**i * reward[t + i] for i in range(ahead + 1)))
        out["obs"].append(td["next", "obs"][t + ahead])
        out["steps"].append(ahead + 1)
        out["gamma"].append(gamma ** (ahead + 1))
        out["nonterminal"].append(ahead != 0)
    return out


@pytest.mark.parametrize("n_steps", [1, 2, 4])
def test_multi_step_matches_a_step_by_step_reference(n_steps):
    data = _transitions([3], 12)
    out = multi_step(data, n_steps=n_steps, gamma=0.9)
    for b in range(3):
        expected = _multi_step_reference(data[b], n_steps, 0.9)
        torch.testing.assert_close(
            out["next", "reward"][b].squeeze(-1), torch.stack(expected["reward"])
        )
        torch.testing.assert_close(out["next", "obs"][b], torch.stack(expected["obs"]))
        assert out["steps_to_next_obs"][b].tolist() == expected["steps"]
        torch.testing.assert_close(out["gamma"][b], torch.tensor(expected["gamma"]))
        assert out["nonterminal"][b].tolist() == expected["nonterminal"]
    torch.testing.assert_close(out["next", "original_reward"], data["next", "reward"])
    assert torch.equal(out["next", "done"], data["next", "done"])
    assert "original_reward" not in data["next"].keys()  # the input is untouched


def test_multi_step_transform_results_do_not_depend_on_how_batches_are_cut():
    data = _transitions([2], 20, seed=1)
    n_steps = 3
    whole = MultiStepTransform(n_steps, 0.9).inv(data)
    chunked = MultiStepTransform(n_steps, 0.9)
    parts = [chunked.inv(data[:, i : i + 5]) for i in range(0, 20, 5)]
    assert whole.shape == (2, 20 - n_steps)
    glued = torch.cat(parts, -1)[:, : 20 - n_steps]
    torch.testing.assert_close(glued["next", "reward"], whole["next", "reward"])
    torch.testing.assert_close(glued["next", "obs"], whole["next", "obs"])
    assert torch.cat(parts, -1).shape == (2, 20 - n_steps)


def test_multi_step_transform_returns_nothing_until_n_steps_were_seen():
    t = MultiStepTransform(n_steps=4, gamma=0.9)
    data = _transitions([], 8)
    assert t.inv(data[:3]) is None
    # torchrl 0.4: as many steps as n_steps give an empty batch (the steps wait for more)
    t = MultiStepTransform(n_steps=3, gamma=0.9)
    assert t.inv(data[:3]).shape == (0,)
    assert t.inv(data[3:8]).shape == (5,)


def test_multi_step_nonterminal_follows_the_mask_and_the_trajectory_end():
    data = _transitions([], 6, p_done=0.0)
    data["mask"] = torch.tensor([True, True, False, True, True, True])
    out = multi_step(data, n_steps=2, gamma=0.5, mask_key="mask")
    assert out["nonterminal"].tolist() == [True, True, False, True, True, False]


def test_multi_step_with_a_done_flag_per_agent():
    # a done of shape [T, A, 1]: the agents become batch dims for the computation
    length, agents = 5, 2
    done = torch.zeros(length, agents, 1, dtype=torch.bool)
    done[1, 0] = True
    reward = torch.arange(float(length * agents)).reshape(length, agents, 1)
    data = TensorDict({"next": {"done": done, "reward": reward, "obs": reward + 100}}, [length])
    out = multi_step(data, n_steps=2, gamma=1.0)
    assert out.shape == (length,)
    for agent in range(agents):
        single = TensorDict(
            {"next": {k: data["next", k][:, agent] for k in ("done", "reward", "obs")}}, [length]
        )
        expected = multi_step(single, n_steps=2, gamma=1.0)
        torch.testing.assert_close(out["next", "reward"][:, agent], expected["next", "reward"])
        torch.testing.assert_close(out["next", "obs"][:, agent], expected["next", "obs"])


def test_multi_step_transform_in_a_compose_and_forward():
    data = _transitions([], 6)
    out = Compose(MultiStepTransform(2, 0.9)).inv(data)
    assert out.shape == (4,) and "steps_to_next_obs" in out.keys()
    assert MultiStepTransform(2, 0.9)(data) is data  # forward is the identity


@pytest.mark.parametrize("n_steps", [0, -1, 1.5])
def test_multi_step_transform_n_steps_must_be_a_positive_int(n_steps):
    with pytest.raises(ValueError, match=re.escape(N_STEPS_ERROR)):
        MultiStepTransform(n_steps, 0.9)
    t = MultiStepTransform(2, 0.9)
    with pytest.raises(ValueError, match=re.escape(N_STEPS_ERROR)):
        t.n_steps = n_steps


def test_multi_step_transform_refuses_envs():
    env = TransformedEnv(CountEnv(), MultiStepTransform(2, 0.9))
    with pytest.raises(ValueError, match=re.escape(MultiStepTransform.ENV_ERR)):
        env.rand_step(env.reset())


def test_multi_step_names_a_missing_done_flag():
    data = _transitions([], 4).exclude(("next", "done"))
    with pytest.raises(KeyError, match="'done' was not found under 'next'"):
        MultiStepTransform(2, 0.9).inv(data)
