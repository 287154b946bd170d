"""ParallelEnv of gymnasium Pendulum envs: splits across processes, async steps, forkserver.

Pendulum's random start states come from each sub-env's own seeded generator, so the rollouts
of ``ParallelEnv(4, Pendulum, num_processes=p)`` must match ``SerialEnv``'s whatever ``p``,
under every start method; short episodes (``max_episode_steps``) make the sub-envs end and
reset (partially) during the rollout.
"""

from __future__ import annotations

import sys

import pytest
import torch

pytest.importorskip("gymnasium")

from rlbatched import ParallelEnv, SerialEnv  # noqa: E402
from rlcore import step_mdp  # noqa: E402
from rllibs import GymEnv  # noqa: E402

METHODS = ["spawn", "forkserver"] + (["fork"] if sys.platform != "darwin" else [])


def make_pendulum(max_episode_steps: int = 5) -> GymEnv:
    return GymEnv("Pendulum-v1", max_episode_steps=max_episode_steps)


FACTORIES = [lambda i=i: make_pendulum(4 + i) for i in range(4)]


def _rollout(env) -> torch.Tensor:
    env.set_seed(5)
    generator = torch.Generator().manual_seed(1)

    def policy(td):
        return td.set("action", torch.rand(4, 1, generator=generator) * 4 - 2)

    try:
        return env.rollout(12, policy, break_when_any_done=False)
    finally:
        env.close()


@pytest.mark.parametrize("method", METHODS)
def test_pendulum_rollouts_equal_across_splits(method):
    expected = _rollout(SerialEnv(4, FACTORIES))
    assert expected["next", "truncated"].any()  # sub-envs were reset along the way
    for processes in (4, 2, 1):
        got = _rollout(ParallelEnv(4, FACTORIES, num_processes=processes, mp_start_method=method))
        assert set(got.keys(True, True)) == set(expected.keys(True, True))
        for key in expected.keys(True, True):
            torch.testing.assert_close(got[key], expected[key], msg=f"{processes}: {key}")


@pytest.mark.parametrize("method", METHODS)
def test_pendulum_async_steps_match_serial_steps(method):
    """Sub-envs stepped asynchronously, in any order, give each sub-env's own trajectory."""
    serial = SerialEnv(4, FACTORIES)
    env = ParallelEnv(4, FACTORIES, num_processes=2, mp_start_method=method)
    try:
        serial.set_seed(3)
        env.set_seed(3)
        td, ref = env.reset(), serial.reset()
        torch.testing.assert_close(td, ref)
        actions = torch.linspace(-2, 2, 4).unsqueeze(-1)
        td["action"] = actions.clone()
        env.async_step_send(td)
        got = {i: [] for i in range(4)}
        for _ in range(6):
            ready = env.async_step_recv()
            for row, index in enumerate(ready["env_index"].tolist()):
                got[index].append(ready["next", "observation"][row])
            nxt = step_mdp(ready)
            nxt["action"] = actions[ready["env_index"]]
            env.async_step_send(nxt)
        env.async_step_recv(min_get=4)
        for step in range(min(len(obs) for obs in got.values())):
            ref["action"] = actions.clone()
            ref = step_mdp(serial.step(ref))
            for index in range(4):
                if step < len(got[index]):
                    torch.testing.assert_close(got[index][step], ref["observation"][index])
    finally:
        env.close()
        serial.close()


def test_forkserver_preloads_torch_and_our_packages():
    """Workers fork from a server that imported our packages (and so torch) once."""
    import multiprocessing.forkserver

    env = ParallelEnv(2, make_pendulum, mp_start_method="forkserver")
    env.reset()
    env.close()
    preload = multiprocessing.forkserver._forkserver._preload_modules
    assert {"rlworkers", "rlbatched"} <= set(preload)  # rlbatched imports torch, tensordict, rlcore


class GeneralPendulum(GymEnv):
    """Pendulum without a stepper: workers step it through its tensordicts."""

    def _stepper(self):
        return None


def test_workers_step_gym_envs_densely_with_the_general_path_s_results():
    from rlbatched import get_env_metadata
    from rlbatched._worker_env import StepperRow

    env = make_pendulum()
    shared = get_env_metadata(make_pendulum).zeros((1,))[0]
    assert StepperRow.build(env, shared.exclude("next"), shared.get("next")) is not None
    general = GeneralPendulum("Pendulum-v1", max_episode_steps=5)
    assert StepperRow.build(general, shared.exclude("next"), shared.get("next")) is None
    factories = [
        lambda i=i: GeneralPendulum("Pendulum-v1", max_episode_steps=4 + i) for i in range(4)
    ]
    expected = _rollout(ParallelEnv(4, factories, num_processes=2, mp_start_method=METHODS[-1]))
    got = _rollout(ParallelEnv(4, FACTORIES, num_processes=2, mp_start_method=METHODS[-1]))
    for key in expected.keys(True, True):
        torch.testing.assert_close(got[key], expected[key], msg=str(key))
