"""`VecGymEnvTransform`: the true final observations of a self-resetting vector env."""

from __future__ import annotations

from typing import Any

import torch
from tensordict import NestedKey, TensorDictBase, unravel_key

from rlspecs import Composite, TensorSpec

from ._base import Transform

__all__ = ["VecGymEnvTransform"]

FORWARD_NOT_IMPLEMENTED = "class {} cannot be executed without a parent environment."
NO_DONE_KEY_ERROR = "Could not find a 'done' key in the env specs."
NO_DONE_SIGNAL_ERROR = "Could not find any done signal in tensordict:\n{tensordict}"
RESET_MISMATCH_ERROR = (
    "Cannot partially reset a gym(nasium) async env with a reset mask that does not match the "
    "done mask. Got reset={reset}\nand done={done}"
)
NO_PARENT_ERROR = "VecGymEnvTransform needs a parent env: put it in a TransformedEnv"


def _rows(mask: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """A per-sub-env mask (`[*B]`) shaped to broadcast over `target` (`[*B, ...]`)."""
    return mask.reshape(*mask.shape, *(1,) * (target.ndim - mask.ndim))


class VecGymEnvTransform(Transform):
    """Makes a self-resetting vector env's steps end on their true final observation.

    Vector envs (Gym's, SB3's) reset a finished sub-env within the step that ends its episode:
    the step returns the new episode's first observation and reports the final one elsewhere.
    An env that writes those final observations under `final_name` (a composite holding the
    observation keys; torchrl 0.4's `terminal_obs_reader` does it from the info dict) gets
    them back in place: at a step where some sub-envs are done, their observations are swapped
    with the final ones, and the reset observations are kept; the reset that follows, with a
    `"_reset"` mask (the done mask, else RuntimeError when it is partial, as in torchrl 0.4;
    the env itself does nothing then, as torchrl 0.4's GymWrapper of a vector env), writes
    them back. A reset without mask is a real reset. `final_name` is removed from the specs
    and the data.

    rllibs' `GymEnv(..., num_envs=N)` already does this itself in every autoreset mode (a step
    returns the final observations, a partial reset the reset ones), and writes no
    `final_name` entry: there the transform only checks that partial resets follow the done
    mask. A step without `final_name` entry is left as it is (torchrl 0.4 wrote NaN in the done
    sub-envs' observations for Gym < 0.22, whose final observations are lost; rllibs wraps
    gymnasium only, which never loses them).

    Args:
        final_name: the entry holding the final observations (default `"final"`).

    Examples:
        >>> from rltransforms import TransformedEnv
        >>> env = TransformedEnv(base_env, VecGymEnvTransform())  # e.g. GymEnv(id, num_envs=2)
        >>> "final" in env.observation_spec.keys()
        False
    """

    def __init__(self, final_name: str = "final") -> None:
        super().__init__()
        self.final_name = final_name
        self._memo: dict[str, Any] = {}
        self._done_keys: list[NestedKey] | None = None
        self._obs_keys: list[NestedKey] | None = None

    def set_container(self, container: Any) -> None:
        super().set_container(container)
        self._done_keys = None
        self._obs_keys = None
        self._memo = {}

    def _require_parent(self) -> Any:
        parent = self.parent
        if parent is None:
            raise RuntimeError(NO_PARENT_ERROR)
        return parent

    @property
    def done_keys(self) -> list[NestedKey]:
        """The parent env's done keys whose last name is `"done"`."""
        if self._done_keys is None:
            keys = [
                unravel_key(key)
                for key in self._require_parent().done_keys
                if (key if isinstance(key, str) else key[-1]) == "done"
            ]
            if not keys:
                raise RuntimeError(NO_DONE_KEY_ERROR)
            self._done_keys = keys
        return self._done_keys

    @property
    def obs_keys(self) -> list[NestedKey]:
        """The parent env's observation keys (leaves)."""
        if self._obs_keys is None:
            self._obs_keys = list(self._require_parent().observation_spec.keys(True, True))
        return self._obs_keys

    def _done(self, tensordict: TensorDictBase) -> torch.Tensor:
        done = None
        for key in self.done_keys:
            value = tensordict.get(key, None)
            if value is not None:
                done = value if done is None else done | value
        if done is None:
            raise RuntimeError(NO_DONE_SIGNAL_ERROR.format(tensordict=tensordict))
        return done

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        done = self._done(next_tensordict)
        self._memo["done"] = done
        self._memo["saved_next"] = None
        final = next_tensordict.pop(self.final_name, None)
        if final is None or not bool(done.any()):
            return next_tensordict
        rows = done.reshape(next_tensordict.batch_size)
        keys = list(final.keys(True, True))
        # what the env wrote there: the reset observations, for the partial reset to come
        self._memo["saved_next"] = next_tensordict.select(*keys).clone()
        for key in keys:
            current = next_tensordict.get(key)
            value = final.get(key).to(current.device)
            # a new tensor: the env may reuse the buffers it returned
            next_tensordict.set(key, torch.where(_rows(rows, current), value, current))
        return next_tensordict

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        tensordict_reset.pop(self.final_name, None)
        reset = tensordict.get("_reset", None)
        done = self._memo.pop("done", None)
        saved_next = self._memo.pop("saved_next", None)
        if reset is None or done is None:
            return tensordict_reset  # a full reset: the env starts every sub-env anew
        done = done.reshape(reset.shape).to(reset.device)
        if (reset != done).any() and not bool(reset.all()):
            raise RuntimeError(RESET_MISMATCH_ERROR.format(reset=reset, done=done))
        # with a mask the env did not reset (it did within the step): its reset observations
        # come back, also when every sub-env is done (torchrl 0.4 skipped that case and kept
        # the final observations as the new episodes' first ones)
        if saved_next is not None and bool(reset.any()):
            rows = reset.reshape(tensordict_reset.batch_size)
            for key, value in saved_next.items(True, True):
                current = tensordict_reset.get(key, None)
                if current is not None:
                    value = torch.where(_rows(rows, current), value.to(current.device), current)
                tensordict_reset.set(key, value)
            for key in self._require_parent().done_keys:
                # the reset sub-envs start a new episode: not done, terminated nor truncated
                flag = tensordict_reset.get(key, None)
                if flag is not None:
                    tensordict_reset.set(key, flag & ~_rows(rows, flag))
        return tensordict_reset

    def transform_observation_spec(self, observation_spec: TensorSpec) -> TensorSpec:
        if isinstance(observation_spec, Composite) and self.final_name in observation_spec.keys():
            del observation_spec[self.final_name]
        return observation_spec

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        raise RuntimeError(FORWARD_NOT_IMPLEMENTED.format(type(self)))

    def __repr__(self) -> str:
        return f"VecGymEnvTransform(final_name={self.final_name!r})"
