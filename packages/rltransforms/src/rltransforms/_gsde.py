"""`gSDENoise`: the `_eps_gSDE` exploration noise primed at reset (generalized state-dependent
exploration)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rlspecs import Unbounded

from ._primers import TensorDictPrimer

__all__ = ["gSDENoise"]

GSDE_KEY = "_eps_gSDE"
ONE_DIM_ERROR = (
    "gSDENoise: state_dim and action_dim go together (got state_dim={state_dim}, "
    "action_dim={action_dim}); pass both for a random ({{action_dim}}, {{state_dim}}) noise "
    "matrix, or neither for a zero placeholder of shape (1,)"
)
BAD_DIM_ERROR = "gSDENoise: {name} must be a positive int, got {value!r}"


class gSDENoise(TensorDictPrimer):  # noqa: N801 - torchrl 0.4's public name
    """Primes the gSDE noise `"_eps_gSDE"` at reset and carries it from step to step.

    A gSDE policy draws its exploration noise from a matrix `eps` fixed for a whole episode;
    this transform keeps that matrix in the data. With `state_dim` and `action_dim`, each reset
    draws a fresh standard normal matrix of shape `(*shape, action_dim, state_dim)` for the
    sub-envs that restart; without them the entry is a zero placeholder of shape `(*shape, 1)`
    that the gSDE module replaces by a matrix of the right size. In an env the leading dims are
    expanded to the env's batch size (as `TensorDictPrimer` does).

    Args:
        state_dim: the size of the features the noise multiplies (give with `action_dim`).
        action_dim: the size of the action (give with `state_dim`).
        shape: leading dims of the noise. Default: none, the noise of one env, expanded to the
            batch size of the env or tensordict. Given, the dims are expanded to the env's batch
            only when they are not the batch size already.
        **kwargs: passed to `TensorDictPrimer` (`default_value` for the placeholder,
            `reset_key`, `expand_specs`, `device`).

    Raises:
        ValueError: only one of `state_dim`/`action_dim` is given, or one is not a positive int.

    Examples:
        >>> from tensordict import TensorDict
        >>> from rltransforms import TransformedEnv
        >>> env = TransformedEnv(base_env, gSDENoise(state_dim=3, action_dim=1))
        >>> td = env.reset()
        >>> td["_eps_gSDE"].shape
        torch.Size([1, 3])
        >>> bool((env.rand_step(td)["next", "_eps_gSDE"] == td["_eps_gSDE"]).all())
        True
        >>> gSDENoise()(TensorDict(batch_size=[2]))["_eps_gSDE"]
        tensor([[0.],
                [0.]])
    """

    def __init__(
        self,
        state_dim: int | None = None,
        action_dim: int | None = None,
        shape: Sequence[int] | None = None,
        **kwargs: Any,
    ) -> None:
        if (state_dim is None) != (action_dim is None):
            raise ValueError(ONE_DIM_ERROR.format(state_dim=state_dim, action_dim=action_dim))
        for name, value in (("state_dim", state_dim), ("action_dim", action_dim)):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise ValueError(BAD_DIM_ERROR.format(name=name, value=value))
        random = state_dim is not None
        tail = (action_dim, state_dim) if random else (1,)
        noise_shape = (*(() if shape is None else tuple(shape)), *tail)
        # without `shape` the spec is one env's noise: always expanded to the env's batch (0.4
        # compared leading dims, so an env batch equal to (action_dim,) lost its batch dim)
        kwargs.setdefault("expand_specs", True if shape is None else None)
        super().__init__(primers={GSDE_KEY: Unbounded(noise_shape)}, random=random, **kwargs)
        self.state_dim = state_dim
        self.action_dim = action_dim

    def __repr__(self) -> str:
        return (
            f"gSDENoise(state_dim={self.state_dim}, action_dim={self.action_dim}, "
            f"noise_shape={tuple(self.__dict__['_given_primers'][GSDE_KEY].shape)}, random={self.random})"
        )
