"""Transforms over the last frames of an episode: `CatFrames` (stack them) and `TimeMaxPool`.

Both keep one buffer per key, reset for the sub-envs a (partial) reset restarts. `CatFrames`
also runs offline: called on a `[*B, T]` tensordict (a rollout, a replay-buffer slice) it
builds the same stacks along time, restarting them where `("next", done)` ends an episode.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import torch
from tensordict import NestedKey, TensorDictBase

from rlspecs import Composite, TensorSpec

from ._base import ObservationTransform, Transform, _get
from ._mapped_specs import spec_through
from ._resets import ResetKeyMixin, expand_right, get_reset

__all__ = ["CatFrames", "TimeMaxPool"]

CAT_DIM_ERROR = (
    "dim must be < 0 to accomodate for tensordict of different batch-sizes "
    "(since negative dims are batch invariant), got dim={dim}"
)
PADDING_ERROR = "CatFrames: padding must be one of {accepted}, got {padding!r}"
# torchrl 0.4's text (typo included, so that a match on it holds), then the replacement
ZEROS_PADDING_ERROR = (
    "Padding option 'zeros' will is deprecated: CatFrames refuses it since torchrl 0.4; "
    "use padding='constant' with padding_value=0"
)
N_ERROR = "{cls}: {name} must be a positive integer, got {value!r}"
AS_INVERSE_ENV_ERROR = (
    "CatFrames as inverse is not supported as a transform for environments, "
    "only for replay buffers."
)
FEATURE_DIM_ERROR = (
    "CatFrames: dim={dim} is not a feature dim of {key!r} (shape {shape}, {batch} batch dims)"
)
BUFFER_SHAPE_ERROR = (
    "{cls}: {key!r} has shape {shape} but the frame buffer was built for shape {expected}; "
    "reset the transform (a full reset rebuilds it) before feeding data of another shape"
)
UNBATCHED_ERROR = (
    "CatFrames cannot process unbatched tensordict instances. Make sure your input has more "
    "than one dimension and the time dimension is marked as 'time', e.g., "
    "`tensordict.refine_names(None, 'time', None)`."
)
NO_TIME_WARNING = (
    "The last dimension of the tensordict should be marked as 'time'. CatFrames will unfold the "
    "data along the time dimension assuming that the time dimension is the last dimension of "
    "the input tensordict. Define a 'time' dimension name (e.g., "
    "`tensordict.refine_names(..., 'time')`) to skip this warning."
)
NO_DONE_ERROR = (
    "CatFrames: {key!r} not found; unfolding [*B, T] data needs the done flags to find where "
    "episodes start (pass done_key= if the flag has another name)"
)
TIME_MAX_POOL_T_ERROR = (
    "TimeMaxPoolTransform T parameter should have a value greater or equal to one, got {T!r}"
)
TIME_MAX_POOL_FORWARD_ERROR = (
    "TimeMaxPool cannot be called independently, only its step and reset methods are "
    "functional: max-pooling needs the sequential order of an env's steps (call `_call` step "
    "by step on sequential data)."
)
RESET_MISSING_ERROR = "{cls}: {key!r} is in neither the reset output nor the reset input"


def _is_next(key: NestedKey) -> bool:
    return isinstance(key, tuple) and len(key) > 1 and key[0] == "next"


def _positive_int(cls: str, name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(N_ERROR.format(cls=cls, name=name, value=value))
    return value


class CatFrames(ResetKeyMixin, ObservationTransform):
    """Concatenates the last `N` observations of each key along `dim`, oldest first.

    In an env, the transform is stateful: a buffer per key holds the last `N` frames of each
    sub-env; a (partial) reset refills it for the sub-envs that restart, with copies of the
    first frame (`padding="same"`) or with `padding_value` (`padding="constant"`).

    Called on a `[*B, T]` tensordict (`t(td)`; a rollout or a replay-buffer slice whose time
    dim is named `"time"`, else the last dim is taken), it builds the same stacks offline
    along time: an episode starts at `t = 0` and after each `("next", done_key)` flag. List
    both `key` and `("next", key)` in `in_keys` to rebuild both entries of a rollout.

    Args:
        N: the number of frames to concatenate.
        dim: the (negative) feature dim along which frames are concatenated.
        in_keys: the entries to stack (default `["pixels"]`).
        out_keys: where to write the stacks (default: `in_keys`).
        padding: `"same"` (repeat the first frame of the episode) or `"constant"`. `"zeros"`
            raises RuntimeError, as in torchrl 0.4 and later (`"constant"` with
            `padding_value=0` replaces it).
        padding_value: the value used with `padding="constant"`.
        as_inverse: apply the stacking in `inv` (for stored data) instead of `forward`.
        reset_key: the reset entry to follow (default: the parent env's only reset key).
        done_key: the done flag that ends episodes in offline data (default `"done"`).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = CatFrames(N=3, dim=-1, in_keys=["obs"])
        >>> for value in range(4):
        ...     out = t._call(TensorDict(obs=torch.tensor([float(value)])))
        >>> out["obs"]
        tensor([1., 2., 3.])
        >>> rollout = TensorDict(
        ...     {"obs": torch.arange(4.0).unsqueeze(-1),
        ...      "next": {"obs": torch.arange(1.0, 5.0).unsqueeze(-1),
        ...               "done": torch.tensor([[False], [True], [False], [False]])}},
        ...     batch_size=[4], names=["time"])
        >>> CatFrames(N=2, dim=-1, in_keys=["obs"], out_keys=["stack"])(rollout)["stack"]
        tensor([[0., 0.],
                [0., 1.],
                [2., 2.],
                [2., 3.]])
    """

    inplace = False
    ACCEPTED_PADDING = {"same", "constant", "zeros"}

    def __init__(
        self,
        N: int,  # noqa: N803  (torchrl's argument name)
        dim: int,
        in_keys: Sequence[NestedKey] | NestedKey | None = None,
        out_keys: Sequence[NestedKey] | NestedKey | None = None,
        padding: str = "same",
        padding_value: float = 0,
        as_inverse: bool = False,
        reset_key: NestedKey | None = None,
        done_key: NestedKey | None = None,
    ) -> None:
        if dim >= 0:
            raise ValueError(CAT_DIM_ERROR.format(dim=dim))
        if padding not in self.ACCEPTED_PADDING:
            raise ValueError(
                PADDING_ERROR.format(accepted=sorted(self.ACCEPTED_PADDING), padding=padding)
            )
        if padding == "zeros":
            raise RuntimeError(ZEROS_PADDING_ERROR)
        super().__init__(in_keys=["pixels"] if in_keys is None else in_keys, out_keys=out_keys)
        self.N = _positive_int("CatFrames", "N", N)
        self.dim = dim
        self.padding = padding
        self.padding_value = padding_value
        self.as_inverse = as_inverse
        self.reset_key = reset_key
        self.done_key = "done" if done_key is None else done_key
        for in_key in self.in_keys:
            self.register_buffer(self._buffer_name(in_key), None)

    @staticmethod
    def _buffer_name(in_key: NestedKey) -> str:
        return f"_cat_buffers_{in_key}"

    @property
    def has_inverse(self) -> bool:
        return self.as_inverse

    # ------------------------------------------------------------------ online (env) path
    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        if self.as_inverse and self.parent is not None:
            raise RuntimeError(AS_INVERSE_ENV_ERROR)
        reset = get_reset(self.reset_key, tensordict)
        with self._tolerate_missing():
            return self._call(tensordict_reset, _reset=reset)

    def _new_buffer(self, data: torch.Tensor, name: str) -> torch.Tensor:
        shape = list(data.shape)
        shape[self.dim] *= self.N
        buffer = torch.full(shape, self.padding_value, dtype=data.dtype, device=data.device)
        setattr(self, name, buffer)
        return buffer

    def _call(
        self, tensordict: TensorDictBase, _reset: torch.Tensor | None = None
    ) -> TensorDictBase:
        """Push each in_key's frame into its buffer and write the stack (a copy) at its out_key.

        With `_reset` (a mask over the leading dims), the flagged buffers are refilled with
        padding and the new frame instead.
        """
        dim, n = self.dim, self.N
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            data = _get(tensordict, in_key)
            if data is None:
                self._missing(in_key, tensordict)
                continue
            if data.ndim + dim < tensordict.batch_dims:
                raise ValueError(
                    FEATURE_DIM_ERROR.format(
                        dim=dim, key=in_key, shape=tuple(data.shape), batch=tensordict.batch_dims
                    )
                )
            name = self._buffer_name(in_key)
            buffer = getattr(self, name)
            d = data.shape[dim]
            expected = list(data.shape)
            expected[dim] *= n
            if buffer is None or (
                (list(buffer.shape) != expected or buffer.dtype != data.dtype)
                and _reset is not None
                and bool(_reset.all())
            ):
                buffer = self._new_buffer(data, name)
            elif list(buffer.shape) != expected:
                frame_shape = list(buffer.shape)
                frame_shape[dim] //= n
                raise ValueError(
                    BUFFER_SHAPE_ERROR.format(
                        cls="CatFrames",
                        key=in_key,
                        shape=tuple(data.shape),
                        expected=tuple(frame_shape),
                    )
                )
            if _reset is None:
                buffer.copy_(torch.cat([buffer.narrow(dim, d, (n - 1) * d), data], dim))
            else:
                if self.padding == "same":
                    padded = torch.cat([data] * n, dim)
                else:
                    pad = torch.full_like(buffer.narrow(dim, 0, (n - 1) * d), self.padding_value)
                    padded = torch.cat([pad, data], dim)
                if bool(_reset.all()):
                    buffer.copy_(padded)
                else:
                    mask = expand_right(_reset.to(buffer.device), buffer)
                    buffer.copy_(torch.where(mask, padded, buffer))
            tensordict.set(out_key, buffer.clone())
        return tensordict

    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        def stack(value: torch.Tensor) -> torch.Tensor:
            return torch.cat([value] * self.N, self.dim)

        if not isinstance(observation_spec, Composite):
            return spec_through("CatFrames", self.in_keys[0], observation_spec, stack)
        keys = set(observation_spec.keys(True, True))
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            if in_key in keys:
                observation_spec[out_key] = spec_through(
                    "CatFrames", in_key, observation_spec[in_key], stack
                )
        return observation_spec

    # ------------------------------------------------------------------ offline path
    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Stack the frames of `[*B, T]` data along time (a no-op when `as_inverse`)."""
        if self.as_inverse:
            return tensordict
        return self.unfolding(tensordict)

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        if self.as_inverse:
            return self.unfolding(tensordict)
        return tensordict

    def _time_dim(self, tensordict: TensorDictBase) -> int:
        if not tensordict.batch_dims:
            raise ValueError(UNBATCHED_ERROR)
        names = tensordict.names
        if "time" in names:
            return names.index("time")
        warnings.warn(NO_TIME_WARNING, category=UserWarning, stacklevel=3)
        return tensordict.batch_dims - 1

    def unfolding(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Write, for each in_key, the stack of its last `N` values along time at its out_key."""
        tdim = self._time_dim(tensordict)
        bdims = tensordict.batch_dims
        done_key = (
            "next",
            *((self.done_key,) if isinstance(self.done_key, str) else self.done_key),
        )
        done = tensordict.get(done_key, None)
        if done is None:
            raise KeyError(NO_DONE_ERROR.format(key=done_key))
        if done.ndim > bdims:
            done = done.flatten(bdims, -1).any(-1)
        done = done.movedim(tdim, -1)  # [*B, T], time last
        index, valid = self._frame_index(done)
        stacks: dict[NestedKey, torch.Tensor] = {}
        pairs = list(zip(self.in_keys, self.out_keys))
        # root entries first: a ("next", key) entry extends the stack of `key`
        for in_key, out_key in sorted(pairs, key=lambda pair: _is_next(pair[0])):
            data = tensordict.get(in_key, None)
            if data is None:
                self._missing(in_key, tensordict)
                continue
            if data.ndim + self.dim < bdims:
                raise ValueError(
                    FEATURE_DIM_ERROR.format(
                        dim=self.dim, key=in_key, shape=tuple(data.shape), batch=bdims
                    )
                )
            data = data.movedim(tdim, bdims - 1)
            root = in_key[1:] if _is_next(in_key) else None
            root = root[0] if root is not None and len(root) == 1 else root
            stack = self._stack(data, index, valid, bdims)
            if root is not None and root in stacks:
                # frames before the episode start are the root stack's, shifted by one
                d = data.shape[self.dim]
                previous = stacks[root].narrow(self.dim, d, (self.N - 1) * d)
                shifted = torch.cat([previous, data], self.dim)
                stack = torch.where(self._frame_mask(valid, data, bdims), stack, shifted)
            stacks[in_key] = stack
            tensordict.set(out_key, stack.movedim(bdims - 1, tdim))
        return tensordict

    def _frame_index(self, done: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """For each time t and frame j, the time read and whether it is in t's episode."""
        steps = done.shape[-1]
        arange = torch.arange(steps, device=done.device)
        start = torch.zeros_like(done, dtype=torch.bool)
        start[..., 0] = True
        start[..., 1:] = done[..., :-1]
        episode_start = torch.where(start, arange, 0).cummax(-1).values.unsqueeze(-1)
        wanted = arange.unsqueeze(-1) - (self.N - 1) + torch.arange(self.N, device=done.device)
        valid = wanted >= episode_start  # [*B, T, N]
        return torch.where(valid, wanted, episode_start), valid

    def _stack(
        self, data: torch.Tensor, index: torch.Tensor, valid: torch.Tensor, bdims: int
    ) -> torch.Tensor:
        """`data`'s frames at `index` stacked along `dim` (padding where not `valid`)."""
        feature = (1,) * (data.ndim - bdims)
        frames = []
        for j in range(self.N):
            idx = index[..., j].reshape(*index.shape[:-1], *feature)
            frames.append(torch.take_along_dim(data, idx, dim=bdims - 1))
        stack = torch.cat(frames, self.dim)
        if self.padding == "constant":
            padding = torch.full_like(stack, self.padding_value)
            stack = torch.where(self._frame_mask(valid, data, bdims), stack, padding)
        return stack

    def _frame_mask(self, valid: torch.Tensor, data: torch.Tensor, bdims: int) -> torch.Tensor:
        """`valid` ([*B, T, N]) spread over the stack of `data`'s frames along `dim`."""
        feature = (1,) * (data.ndim - bdims)
        masks = [
            valid[..., j].reshape(*valid.shape[:-1], *feature).expand_as(data)
            for j in range(self.N)
        ]
        return torch.cat(masks, self.dim)

    def __repr__(self) -> str:
        return (
            f"CatFrames(N={self.N}, dim={self.dim}, keys={self.in_keys}, padding={self.padding!r})"
        )


class TimeMaxPool(ResetKeyMixin, Transform):
    """Writes, for each key, the elementwise max of its last `T` values in the episode.

    At reset the buffer of each restarting sub-env is filled with its first observation, so
    the pool covers `min(T, steps since reset + 1)` values.

    Args:
        in_keys: the entries to pool (default `["observation"]`).
        out_keys: where to write the pooled values (default: `in_keys`).
        T: the number of time steps pooled.
        reset_key: the reset entry to follow (default: the parent env's only reset key).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = TimeMaxPool(in_keys=["obs"], T=2)
        >>> for value in (3.0, 1.0, 2.0):
        ...     out = t._call(TensorDict(obs=torch.tensor([value])))
        >>> out["obs"]
        tensor([2.])
    """

    invertible = False

    def __init__(
        self,
        in_keys: Sequence[NestedKey] | NestedKey | None = None,
        out_keys: Sequence[NestedKey] | NestedKey | None = None,
        T: int = 1,  # noqa: N803  (torchrl's argument name)
        reset_key: NestedKey | None = None,
    ) -> None:
        if isinstance(T, bool) or not isinstance(T, int) or T < 1:
            raise ValueError(TIME_MAX_POOL_T_ERROR.format(T=T))
        super().__init__(in_keys=["observation"] if in_keys is None else in_keys, out_keys=out_keys)
        if len(self.in_keys) != len(self.out_keys):
            raise ValueError(
                "TimeMaxPoolTransform in_keys and out_keys don't have the same number of "
                f"elements: {self.in_keys} vs {self.out_keys}"
            )
        self.buffer_size = T
        self.reset_key = reset_key
        for in_key in self.in_keys:
            self.register_buffer(self._buffer_name(in_key), None)

    @staticmethod
    def _buffer_name(in_key: NestedKey) -> str:
        key = "_".join(in_key) if isinstance(in_key, tuple) else in_key
        return f"_maxpool_buffer_{key}"

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        reset = get_reset(self.reset_key, tensordict)
        for in_key in self.in_keys:
            if tensordict_reset.get(in_key, None) is None:
                previous = tensordict.get(in_key, None)
                if previous is None:
                    raise KeyError(RESET_MISSING_ERROR.format(cls="TimeMaxPool", key=in_key))
                tensordict_reset.set(in_key, previous)
        return self._call(tensordict_reset, _reset=reset)

    def _call(
        self, tensordict: TensorDictBase, _reset: torch.Tensor | None = None
    ) -> TensorDictBase:
        """Push each in_key's value into its buffer and write the max over the buffer."""
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            data = _get(tensordict, in_key)
            if data is None:
                self._missing(in_key, tensordict)
                continue
            name = self._buffer_name(in_key)
            buffer = getattr(self, name)
            full = _reset is None or bool(_reset.all())
            if buffer is None or (full and _reset is not None and buffer.shape[1:] != data.shape):
                buffer = data.unsqueeze(0).repeat(self.buffer_size, *(1,) * data.ndim)
                setattr(self, name, buffer)
            elif buffer.shape[1:] != data.shape:
                raise ValueError(
                    BUFFER_SHAPE_ERROR.format(
                        cls="TimeMaxPool",
                        key=in_key,
                        shape=tuple(data.shape),
                        expected=tuple(buffer.shape[1:]),
                    )
                )
            elif _reset is None:
                buffer.copy_(torch.cat([data.unsqueeze(0), buffer[:-1]], 0))
            elif full:
                buffer.copy_(data.unsqueeze(0).expand_as(buffer))
            else:
                mask = expand_right(_reset.to(buffer.device), data).unsqueeze(0)
                buffer.copy_(torch.where(mask, data.unsqueeze(0), buffer))
            tensordict.set(out_key, buffer.max(0).values)
        return tensordict

    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        if not isinstance(observation_spec, Composite):
            return observation_spec
        keys = set(observation_spec.keys(True, True))
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            if in_key in keys and out_key != in_key:
                spec: TensorSpec = observation_spec[in_key]
                observation_spec[out_key] = spec.clone()
        return observation_spec

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        raise NotImplementedError(TIME_MAX_POOL_FORWARD_ERROR)

    def __repr__(self) -> str:
        return (
            f"TimeMaxPool(T={self.buffer_size}, in_keys={self.in_keys}, out_keys={self.out_keys})"
        )
