"""Shared fixtures: small deterministic gymnasium envs (no rendering stack needed)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

gym = pytest.importorskip("gymnasium")


class CountingGymEnv(gym.Env):
    """Counts its steps: reward = the step index (1, 2, ...), terminated at ``max_steps``.

    The observation is ``[count, noise]`` where ``noise`` is drawn at reset from the env's
    seeded generator, so that seeding is observable.
    """

    metadata = {"render_modes": ["rgb_array"]}

    def __init__(self, max_steps: int = 5, render_mode: str | None = None) -> None:
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.max_steps = max_steps
        self.render_mode = render_mode
        self.count = 0
        self.noise = 0.0

    def _obs(self) -> np.ndarray:
        return np.array([self.count, self.noise], dtype=np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.count = 0
        self.noise = float(self.np_random.uniform())
        return self._obs(), {"count": self.count}

    def step(self, action):
        self.count += 1
        terminated = self.count >= self.max_steps
        return self._obs(), float(self.count), terminated, False, {"count": self.count}

    def render(self):
        return np.full((8, 6, 3), self.count, dtype=np.uint8)


class ImageGymEnv(gym.Env):
    """An env whose observation is an 8x6 RGB image (uint8)."""

    def __init__(self) -> None:
        self.observation_space = gym.spaces.Box(0, 255, (8, 6, 3), np.uint8)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self.observation_space.sample(), {}

    def step(self, action):
        return self.observation_space.sample(), 0.0, False, False, {}


class SpaceGymEnv(gym.Env):
    """An env with the given spaces: observations are samples of its observation space."""

    def __init__(self, observation_space, action_space) -> None:
        self.observation_space = observation_space
        self.action_space = action_space
        self.last_action = None

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if seed is not None:
            self.observation_space.seed(seed)
        return self.observation_space.sample(), {}

    def step(self, action):
        self.last_action = action
        return self.observation_space.sample(), 0.0, False, False, {}


@pytest.fixture(autouse=True)
def _run_in_tmp_path(tmp_path, monkeypatch):
    """MuJoCo writes MUJOCO_LOG.TXT into the working directory on model warnings: keep it out."""
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def space_env_cls():
    return SpaceGymEnv


@pytest.fixture
def counting_env_cls():
    return CountingGymEnv


@pytest.fixture
def image_env_cls():
    return ImageGymEnv


# What a renderer needs: an OpenGL context of the backend MuJoCo is told to use
GL_PROBE = "import mujoco; c = mujoco.GLContext(8, 8); c.make_current(); c.free()"


@pytest.fixture(scope="session")
def gl_env() -> dict[str, str]:
    """The environment of a rendering subprocess; skips the test where no OpenGL context of
    that backend (``MUJOCO_GL``, EGL by default) can be made: the one reason a pixel test may
    not run. Anything else the test does, it does with a renderer, and fails on its own."""
    pytest.importorskip("mujoco")
    env = {**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    probe = subprocess.run(
        [sys.executable, "-c", GL_PROBE], env=env, capture_output=True, text=True
    )
    if probe.returncode:
        why = (probe.stderr.strip().splitlines() or ["no output"])[-1]
        pytest.skip(f"no OpenGL renderer for MUJOCO_GL={env['MUJOCO_GL']}: {why}")
    return env
