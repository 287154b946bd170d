"""The vector/image mock family: envs whose state is a 7-vector nudged by the action.

All six classes share `_MockEnv`: a counter seeded by `set_seed` (``seed % 17``), a
state key (`_out_key`) read at each step and an observation key (`out_key`) written
next to it. The "Conv" variants store the 7-vector on the diagonal of an image; the
"Numpy" variants use a channel-last (H, W, 3) image as Gym would.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from tensordict import TensorDict, TensorDictBase

from rlcore import EnvBase
from rlspecs import Bounded, Categorical, Composite, OneHot, TensorSpec, Unbounded

from ._spec_utils import as_composite

__all__ = [
    "ContinuousActionConvMockEnv",
    "ContinuousActionConvMockEnvNumpy",
    "ContinuousActionVecMockEnv",
    "DiscreteActionConvMockEnv",
    "DiscreteActionConvMockEnvNumpy",
    "DiscreteActionVecMockEnv",
]

ONE_HOT_SUM_ERROR = (
    "{cls}: each one-hot 'action' must have exactly one True entry, got sums {sums}."
)
MISSING_STATE = (
    "{cls}._step reads the state {key!r} from its input (reset outputs it while the state "
    "spec holds it); got keys {keys}."
)


def _cast_leaves(
    spec: Composite, from_dtype: torch.dtype | None, to_dtype: torch.dtype, nested: bool
) -> None:
    """Cast in place the leaves of ``spec`` of ``from_dtype`` (any dtype when None)."""
    for key in list(spec.keys(nested, True)):
        leaf = spec[key]
        if leaf.dtype != to_dtype and (from_dtype is None or leaf.dtype == from_dtype):
            spec[key] = leaf.to(to_dtype)


class _MockEnv(EnvBase):
    """Shared machinery of the vector/image mocks (not exported).

    Subclasses set the observation keys and shape, the default action spec
    (``_default_action(batch_size, options)``), and
    `_obs_in` (stored observation -> 7-vector) / `_obs_out` (7-vector -> stored
    observation); `__init__` assembles the specs of their section of MOCKS.md.
    """

    size = 7
    out_key = "observation"
    _out_key = "observation_orig"
    _state_source_key = "observation"  # the observation whose spec the state reuses
    custom_attr = 1

    def __init__(
        self,
        *,
        observation_spec: Composite | None = None,
        action_spec: TensorSpec | None = None,
        state_spec: Composite | None = None,
        reward_spec: TensorSpec | None = None,
        done_spec: TensorSpec | None = None,
        seed: int = 100,
        device: torch.device | str | None = "cpu",
        dtype: torch.dtype | None = None,
        batch_size: Sequence[int] | None = None,
        allow_done_after_reset: bool = False,
        **options,
    ) -> None:
        batch_size = torch.Size(batch_size if batch_size is not None else ())
        super().__init__(
            device=device, batch_size=batch_size, allow_done_after_reset=allow_done_after_reset
        )
        if observation_spec is None:
            shape = (*batch_size, *self._observation_shape(options))
            observation_spec = Composite(
                {key: Unbounded(shape=shape) for key in (self.out_key, self._out_key)},
                shape=batch_size,
            )
        if action_spec is None:
            action_spec = self._default_action(batch_size, options)
        if state_spec is None:
            state_spec = Composite(
                {self._out_key: observation_spec[self._state_source_key]}, shape=batch_size
            )
        if reward_spec is None:
            reward_spec = Unbounded(shape=(*batch_size, 1))
        if done_spec is None:
            done_spec = Categorical(2, shape=(*batch_size, 1), dtype=torch.bool)
        if not isinstance(done_spec, Composite):
            done_spec = Composite({"done": done_spec, "terminated": done_spec}, shape=batch_size)
        specs = {
            "observation": observation_spec,
            "action": as_composite(action_spec, "action", batch_size),
            "state": state_spec,
            "reward": as_composite(reward_spec, "reward", batch_size),
            "done": done_spec,
        }
        specs = {role: spec.clone() for role, spec in specs.items()}
        float_dtype = torch.get_default_dtype()
        _cast_leaves(specs["observation"], None, float_dtype, nested=False)
        _cast_leaves(specs["reward"], None, float_dtype, nested=True)
        if dtype is not None and dtype != float_dtype:
            for spec in specs.values():
                _cast_leaves(spec, float_dtype, dtype, nested=True)
        self.full_observation_spec = specs["observation"].to(self.device)
        self.full_action_spec = specs["action"].to(self.device)
        self.full_state_spec = specs["state"].to(self.device)
        self.full_reward_spec = specs["reward"].to(self.device)
        self.full_done_spec = specs["done"].to(self.device)
        self.set_seed(seed)
        self.is_closed = False

    def _observation_shape(self, options: dict) -> tuple[int, ...]:
        return (self.size,)

    def _obs_in(self, obs: torch.Tensor) -> torch.Tensor:
        return obs

    def _obs_out(self, obs: torch.Tensor) -> torch.Tensor:
        return obs

    @property
    def maxstep(self) -> int:
        """Divisor applied to the action before it is added to the state (100)."""
        return 100

    @property
    def custom_prop(self) -> int:
        """A read-only property (2), read through batched envs by the tests."""
        return 2

    @property
    def custom_td(self) -> TensorDict:
        """A constant ``TensorDict({"a": zeros(3)}, [])``."""
        return TensorDict({"a": torch.zeros(3)}, [])

    def custom_fun(self) -> int:
        """A custom method (returns 0), called through batched envs by the tests."""
        return 0

    def _set_seed(self, seed: int | None) -> None:
        self.seed = seed
        self.counter = seed % 17

    def _done_false(self) -> torch.Tensor:
        return torch.zeros((*self.batch_size, 1), dtype=torch.bool, device=self.device)

    def _state_in(self, tensordict: TensorDictBase) -> torch.Tensor:
        """The 7-vector of the state entry ``_out_key`` of a step's input."""
        state = tensordict.get(self._out_key, None)
        if state is None:
            raise KeyError(
                MISSING_STATE.format(
                    cls=type(self).__name__,
                    key=self._out_key,
                    keys=sorted(map(str, tensordict.keys(True, True))),
                )
            )
        return self._obs_in(state)


class DiscreteActionVecMockEnv(_MockEnv):
    """A 7-vector state that one-hot actions nudge by 1/100; reward when it hits ``counter + 1``.

    Specs (``*B`` = batch_size): observation ``observation`` and ``observation_orig``
    Unbounded (*B, 7); state ``observation_orig``; action ``action`` OneHot(7) bool
    (*B, 7), or Categorical(7) int64 (*B) with ``categorical_action_encoding=True``;
    reward Unbounded (*B, 1); done/terminated bool (*B, 1).

    Reset bumps ``counter`` and sets both observations to ``counter`` everywhere (16
    after default construction). A step adds ``action / 100`` to ``observation_orig``,
    writes the result to both keys, gives reward 1.0 when any entry is close to
    ``counter + 1`` and is never done.

    Examples:
        >>> env = DiscreteActionVecMockEnv()
        >>> env.reset()["observation"]
        tensor([16., 16., 16., 16., 16., 16., 16.])
    """

    def __init__(
        self,
        *,
        from_pixels: bool = False,
        categorical_action_encoding: bool = False,
        **kwargs,
    ) -> None:
        super().__init__(categorical_action_encoding=categorical_action_encoding, **kwargs)
        self.from_pixels = from_pixels
        self.categorical_action_encoding = categorical_action_encoding

    def _default_action(self, batch_size: torch.Size, options: dict) -> TensorSpec:
        if options["categorical_action_encoding"]:
            return Categorical(self.size, shape=batch_size)
        return OneHot(self.size, shape=(*batch_size, self.size))

    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        self.counter += 1
        state = torch.full(
            (*self.batch_size, self.size),
            float(self.counter),
            dtype=torch.get_default_dtype(),
            device=self.device,
        )
        return TensorDict(
            {
                self.out_key: self._obs_out(state),
                self._out_key: self._obs_out(state),
                "done": self._done_false(),
                "terminated": self._done_false(),
            },
            batch_size=self.batch_size,
            device=self.device,
        )

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        tensordict = tensordict.to(self.device)
        action = tensordict.get("action")
        if not self.categorical_action_encoding:
            sums = action.sum(-1)
            if not (sums == 1).all():
                raise ValueError(
                    ONE_HOT_SUM_ERROR.format(cls=type(self).__name__, sums=sums.tolist())
                )
        vec = self._state_in(tensordict)
        if action.ndim < vec.ndim:
            action = action.unsqueeze(-1)
        obs = vec + action / self.maxstep
        hit = torch.isclose(obs, torch.full_like(obs, float(self.counter + 1)))
        reward = hit.any(-1, keepdim=True).to(torch.get_default_dtype())
        return TensorDict(
            {
                self.out_key: self._obs_out(obs),
                self._out_key: self._obs_out(obs),
                "reward": reward,
                "done": self._done_false(),
                "terminated": self._done_false(),
            },
            batch_size=tensordict.batch_size,
            device=self.device,
        )


class DiscreteActionConvMockEnv(DiscreteActionVecMockEnv):
    """`DiscreteActionVecMockEnv` whose 7-vector lives on the diagonal of a (1, 7, 7) image.

    Specs: observation ``pixels`` and ``pixels_orig`` Unbounded (*B, 1, 7, 7); state
    ``pixels_orig``; action OneHot(7) bool (*B, 7); reward Unbounded (*B, 1);
    done/terminated bool (*B, 1).

    Reset puts ``counter`` on the diagonal; a step adds ``action / 100`` to the diagonal
    and rewards as `DiscreteActionVecMockEnv` does.

    Examples:
        >>> env = DiscreteActionConvMockEnv()
        >>> env.reset()["pixels"].shape
        torch.Size([1, 7, 7])
    """

    out_key = "pixels"
    _out_key = "pixels_orig"
    _state_source_key = "pixels"

    def __init__(self, *, from_pixels: bool = True, **kwargs) -> None:
        super().__init__(from_pixels=from_pixels, **kwargs)

    def _observation_shape(self, options: dict) -> tuple[int, ...]:
        return (1, self.size, self.size)

    def _obs_in(self, obs: torch.Tensor) -> torch.Tensor:
        return obs.diagonal(0, -2, -1).squeeze(-2)

    def _obs_out(self, obs: torch.Tensor) -> torch.Tensor:
        return torch.diag_embed(obs).unsqueeze(-3)


class DiscreteActionConvMockEnvNumpy(DiscreteActionConvMockEnv):
    """`DiscreteActionConvMockEnv` with channel-last (7, 7, 3) images, as Gym lays them out.

    Specs: observation ``pixels`` and ``pixels_orig`` Unbounded (*B, 7, 7, 3); state
    ``pixels_orig``; action OneHot(7) (*B, 7), or Categorical(7) of shape (*B, 7) with
    ``categorical_action_encoding=True``; reward Unbounded (*B, 1); done/terminated bool
    (*B, 1). A ``done_spec`` argument is ignored (the default is always used).

    The 7-vector sits on the spatial diagonal of every channel; reset and step are those
    of `DiscreteActionConvMockEnv`.

    Examples:
        >>> env = DiscreteActionConvMockEnvNumpy()
        >>> env.reset()["pixels"].shape
        torch.Size([7, 7, 3])
    """

    _state_source_key = "pixels_orig"

    def __init__(self, *, done_spec: TensorSpec | None = None, **kwargs) -> None:
        # The seed mock silently drops ``done_spec`` here; keep that behaviour.
        super().__init__(**kwargs)

    def _observation_shape(self, options: dict) -> tuple[int, ...]:
        return (self.size, self.size, 3)

    def _default_action(self, batch_size: torch.Size, options: dict) -> TensorSpec:
        if options["categorical_action_encoding"]:
            return Categorical(self.size, shape=(*batch_size, self.size))
        return OneHot(self.size, shape=(*batch_size, self.size))

    def _obs_in(self, obs: torch.Tensor) -> torch.Tensor:
        return obs[..., 0].diagonal(0, -2, -1)

    def _obs_out(self, obs: torch.Tensor) -> torch.Tensor:
        image = torch.diag_embed(obs).unsqueeze(-1)
        return image.expand(*image.shape[:-1], 3)


class ContinuousActionVecMockEnv(_MockEnv):
    """A random 7-vector state nudged by a continuous action in [-1, 1] scaled by 1/100.

    Specs: observation ``observation`` and ``observation_orig`` Unbounded (*B, 7); state
    ``observation_orig``; action Bounded[-1, 1] float32 (*B, 7); reward Unbounded
    (*B, 1); done/terminated bool (*B, 1).

    Reset bumps ``counter``, zeroes ``step_count`` and draws both observations from the
    global RNG (``observation_spec.rand()``); a state entry that the observation spec no
    longer holds (after ``observation_spec`` is reassigned) is drawn from the state spec, so
    the step always finds it. A step increments ``step_count``, adds
    ``action / 100`` to ``observation_orig`` and writes it to both keys; reward, done and
    terminated are 1/True where any entry is close to ``counter + 1`` (practically never).

    The reward is in the default float dtype, as the seed's class has it. Current torchrl's
    class adapts it instead to the reward spec (its dtype, e.g. float64 after
    ``dtype=torch.float64``, and its shape): set the class attribute ``adapt_dtype = True``
    (as current torchrl does) or pass ``adapt_dtype=True`` to get that.

    Examples:
        >>> env = ContinuousActionVecMockEnv()
        >>> env.rollout(3)["next", "observation"].shape
        torch.Size([3, 7])
        >>> env = ContinuousActionVecMockEnv(dtype=torch.float64, adapt_dtype=True)
        >>> env.rand_step(env.reset())["next", "reward"].dtype
        torch.float64
    """

    # False: the seed's float reward; True: current torchrl's, in the reward spec's dtype/shape
    adapt_dtype: bool = False

    def __init__(
        self, *, from_pixels: bool = False, adapt_dtype: bool | None = None, **kwargs
    ) -> None:
        super().__init__(**kwargs)
        self.from_pixels = from_pixels
        if adapt_dtype is not None:
            self.adapt_dtype = adapt_dtype
        self.step_count = 0

    def _default_action(self, batch_size: torch.Size, options: dict) -> TensorSpec:
        return Bounded(-1, 1, shape=(*batch_size, self.size))

    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        self.counter += 1
        self.step_count = 0
        result = TensorDict(batch_size=self.batch_size, device=self.device)
        result.update(self.observation_spec.rand())
        drawn = result.keys(True, True)
        for key in self.state_keys:
            if key not in drawn:
                result.set(key, self.full_state_spec[key].rand())
        result.set("done", self._done_false())
        result.set("terminated", self._done_false())
        return result

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        self.step_count += 1
        tensordict = tensordict.to(self.device)
        vec = self._state_in(tensordict)
        action = tensordict.get("action")
        if action.ndim < vec.ndim:  # image states keep a channel dim: (*B, C, W)
            action = action.unsqueeze(-2)
        obs = vec + action / self.maxstep
        hit = torch.isclose(obs, torch.full_like(obs, float(self.counter + 1)))
        while hit.ndim > len(tensordict.batch_size):
            hit = hit.any(-1)
        hit = hit.unsqueeze(-1)
        if self.adapt_dtype:
            reward_spec = self.reward_spec
            reward = hit.to(reward_spec.dtype).expand(reward_spec.shape)
        else:
            reward = hit.to(torch.get_default_dtype())
        return TensorDict(
            {
                self.out_key: self._obs_out(obs),
                self._out_key: self._obs_out(obs),
                "reward": reward,
                "done": hit,
                "terminated": hit.clone(),
            },
            batch_size=tensordict.batch_size,
            device=self.device,
        )


class ContinuousActionConvMockEnv(ContinuousActionVecMockEnv):
    """`ContinuousActionVecMockEnv` on images: the state is the diagonal of a ``pixel_shape`` image.

    Specs: observation ``pixels`` and ``pixels_orig`` Unbounded (*B, *pixel_shape)
    (default (1, 7, 7)); state ``pixels_orig``; action Bounded[-1, 1] (*B,
    pixel_shape[-1]); reward Unbounded (*B, 1); done/terminated bool (*B, 1).

    Reset draws both images at random (not diagonal). A step takes the diagonal of
    ``pixels_orig`` (shape (1, 7)), adds ``action / 100``, writes its diagonal embedding
    to both keys and reduces the hit test with ``any`` to (*B, 1).

    Examples:
        >>> env = ContinuousActionConvMockEnv()
        >>> env.rand_step(env.reset())["next", "pixels"].shape
        torch.Size([1, 7, 7])
    """

    out_key = "pixels"
    _out_key = "pixels_orig"
    _state_source_key = "pixels"

    def __init__(
        self,
        *,
        from_pixels: bool = True,
        pixel_shape: Sequence[int] | None = None,
        **kwargs,
    ) -> None:
        pixel_shape = tuple(pixel_shape) if pixel_shape is not None else (1, 7, 7)
        super().__init__(from_pixels=from_pixels, pixel_shape=pixel_shape, **kwargs)
        self.pixel_shape = pixel_shape

    def _observation_shape(self, options: dict) -> tuple[int, ...]:
        return options["pixel_shape"]

    def _default_action(self, batch_size: torch.Size, options: dict) -> TensorSpec:
        return Bounded(-1, 1, shape=(*batch_size, options["pixel_shape"][-1]))

    def _obs_in(self, obs: torch.Tensor) -> torch.Tensor:
        return obs.diagonal(0, -2, -1)

    def _obs_out(self, obs: torch.Tensor) -> torch.Tensor:
        return torch.diag_embed(obs)


class ContinuousActionConvMockEnvNumpy(ContinuousActionConvMockEnv):
    """`ContinuousActionConvMockEnv` with channel-last (7, 7, 3) images.

    Specs: observation ``pixels`` and ``pixels_orig`` Unbounded (*B, 7, 7, 3); state
    ``pixels_orig``; action Bounded[-1, 1] (*B, 7); reward Unbounded (*B, 1);
    done/terminated bool (*B, 1).

    Reset draws random images; a step adds ``action / 100`` to the 7-vector read from
    the spatial diagonal of channel 0 and writes it back on the diagonal of all channels.

    Examples:
        >>> env = ContinuousActionConvMockEnvNumpy()
        >>> env.reset()["pixels"].shape
        torch.Size([7, 7, 3])
    """

    def _observation_shape(self, options: dict) -> tuple[int, ...]:
        return (self.size, self.size, 3)

    def _default_action(self, batch_size: torch.Size, options: dict) -> TensorSpec:
        return Bounded(-1, 1, shape=(*batch_size, self.size))

    def _obs_in(self, obs: torch.Tensor) -> torch.Tensor:
        return obs[..., 0].diagonal(0, -2, -1)

    def _obs_out(self, obs: torch.Tensor) -> torch.Tensor:
        image = torch.diag_embed(obs).unsqueeze(-1)
        return image.expand(*image.shape[:-1], 3)
