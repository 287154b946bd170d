"""`ActionChunkTransform`: per-step action chunks (training targets) from trajectory windows."""

from __future__ import annotations

import torch
from tensordict import NestedKey, TensorDictBase, unravel_key

from rlspecs import Composite

from ._base import Transform

__all__ = ["ActionChunkTransform"]

CHUNK_SIZE_ERROR = "chunk_size must be >= 1, got {chunk_size}."
MISSING_ERROR = "ActionChunkTransform: {key!r} not found in the tensordict (keys: {keys})"
LAYOUT_ERROR = (
    "ActionChunkTransform expects the action dimension to immediately follow the time dimension "
    "(action shaped [..., T, action_dim]); got action.shape={shape} with time_dim={time_dim}."
)
DONE_SHAPE_ERROR = (
    "ActionChunkTransform: the ('next', {key!r}) entry of shape {shape} does not line up with "
    "the action of shape {action}: expected {expected} or {lead}. Pass done_key=None to chunk "
    "without trajectory-boundary information."
)
VLA_CHUNK_KEY = ("vla_action", "chunk")


class ActionChunkTransform(Transform):
    """Builds, for each step `t`, the chunk of actions `a[t], ..., a[t+H-1]` (a training target).

    The action is read as `[*B, T, action_dim]` (each row along `time_dim` one trajectory
    window). Slots past the end of the window repeat its last action and are flagged in the
    `pad_key` mask; when the input holds `("next", done_key)`, chunks also stop at the
    trajectory boundaries it marks. The chunk is written at `chunk_key`
    (`[*B, T, H, action_dim]`), the mask at `pad_key` (`[*B, T, H]`).

    A data transform (replay-buffer samples, `t(td)`): attached to an env it does nothing.

    Args:
        chunk_size: the horizon `H` of a chunk.
        action_key: the per-step action (default `"action"`).
        chunk_key: where to write the chunk (default `("vla_action", "chunk")`).
        pad_key: where to write the padding mask (default `"action_is_pad"`).
        time_dim: the time dim of the action (default -2; the action dim must follow it).
        done_key: the done entry read under `"next"` (default `"done"`; None ignores it).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = ActionChunkTransform(chunk_size=3)
        >>> td = TensorDict({"action": torch.arange(4).view(1, 4, 1).float()}, batch_size=[1, 4])
        >>> td = t(td)
        >>> td["vla_action", "chunk"][0, :, :, 0]
        tensor([[0., 1., 2.],
                [1., 2., 3.],
                [2., 3., 3.],
                [3., 3., 3.]])
        >>> td["action_is_pad"][0]
        tensor([[False, False, False],
                [False, False, False],
                [False, False,  True],
                [False,  True,  True]])
    """

    def __init__(
        self,
        chunk_size: int,
        *,
        action_key: NestedKey = "action",
        chunk_key: NestedKey = VLA_CHUNK_KEY,
        pad_key: NestedKey = "action_is_pad",
        time_dim: int = -2,
        done_key: NestedKey | None = "done",
    ) -> None:
        if chunk_size < 1:
            raise ValueError(CHUNK_SIZE_ERROR.format(chunk_size=chunk_size))
        super().__init__(in_keys=[action_key], out_keys=[chunk_key, pad_key])
        self.chunk_size = int(chunk_size)
        self.time_dim = int(time_dim)
        self.action_key = unravel_key(action_key)
        self.chunk_key = unravel_key(chunk_key)
        self.pad_key = unravel_key(pad_key)
        self.done_key = None if done_key is None else unravel_key(done_key)

    def _done(self, tensordict: TensorDictBase, action: torch.Tensor, dim: int) -> torch.Tensor:
        """`[*B, T]` trajectory ends: the last step of the window, and every done step."""
        lead = action.shape[: dim + 1]
        ends = torch.zeros(lead, dtype=torch.bool, device=action.device)
        ends[..., -1] = True
        if self.done_key is None:
            return ends
        key = (
            ("next", self.done_key) if isinstance(self.done_key, str) else ("next", *self.done_key)
        )
        done = tensordict.get(key, None)
        if done is None:
            return ends
        if done.shape == torch.Size((*lead, 1)):
            done = done.squeeze(-1)
        elif done.shape != lead:
            raise ValueError(
                DONE_SHAPE_ERROR.format(
                    key=self.done_key,
                    shape=tuple(done.shape),
                    action=tuple(action.shape),
                    expected=(*lead, 1),
                    lead=tuple(lead),
                )
            )
        return ends | done.to(device=action.device, dtype=torch.bool)

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Write the chunks and their padding mask (the env path does not call this)."""
        action = tensordict.get(self.action_key, None)
        if action is None:
            if self.missing_tolerance:
                return tensordict
            raise KeyError(
                MISSING_ERROR.format(
                    key=self.action_key, keys=sorted(map(str, tensordict.keys(True, True)))
                )
            )
        dim = self.time_dim if self.time_dim >= 0 else action.dim() + self.time_dim
        if dim < 0 or dim != action.dim() - 2:
            raise ValueError(LAYOUT_ERROR.format(shape=tuple(action.shape), time_dim=self.time_dim))
        ends = self._done(tensordict, action, dim)
        length = action.shape[dim]
        steps = torch.arange(length, device=action.device)
        # the end of each step's trajectory: the first end at or after it (a reversed cummin)
        end_at = torch.where(ends, steps, length - 1)
        end_of = end_at.flip(-1).cummin(-1).values.flip(-1)  # [*B, T]
        slots = torch.arange(self.chunk_size, device=action.device)
        wanted = steps.unsqueeze(-1) + slots  # [T, H]
        source = torch.minimum(wanted, end_of.unsqueeze(-1))  # [*B, T, H]
        pad = wanted > end_of.unsqueeze(-1)
        flat = source.reshape(*source.shape[:-2], -1)  # [*B, T*H]
        index = flat.unsqueeze(-1).expand(*flat.shape, action.shape[-1])
        chunk = action.gather(dim, index).reshape(*source.shape, action.shape[-1])
        tensordict.set(self.chunk_key, chunk)
        tensordict.set(self.pad_key, pad)
        return tensordict

    # attached to an env the transform is a no-op: executing chunks is MultiAction's job
    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        return next_tensordict

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        return next_tensordict

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        return tensordict_reset

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        return tensordict

    def transform_input_spec(self, input_spec: Composite) -> Composite:
        return input_spec

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        return output_spec

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(chunk_size={self.chunk_size}, action_key={self.action_key}, "
            f"chunk_key={self.chunk_key}, pad_key={self.pad_key})"
        )
