"""Current torchrl's optional transform hooks around a step: `TransformHooks`.

`Transform` derives from it, `Compose` chains each hook over its members and `TransformedEnv`
exposes the chain to the env machinery: ``_post_step_mdp_hooks`` (after `step_mdp`),
``transform_fake_tensordict`` (in ``fake_tensordict``) and ``_check_batched_worker_compat``.
"""

from __future__ import annotations

from tensordict import TensorDictBase

__all__ = ["TransformHooks"]


class TransformHooks:
    """The no-op defaults of the hooks; a transform overrides the ones it needs.

    Examples:
        >>> from tensordict import TensorDict
        >>> from rltransforms import Transform
        >>> t = Transform()
        >>> t.has_post_step_mdp_hooks
        False
        >>> td, root = TensorDict(), TensorDict()
        >>> t._post_step_mdp_hooks(td, root) == (td, root)
        True
    """

    def _post_step_mdp_hooks(
        self, tensordict: TensorDictBase, tensordict_: TensorDictBase
    ) -> tuple[TensorDictBase, TensorDictBase]:
        """Adjust a step's data once `step_mdp` has built the next root (nothing by default).

        ``tensordict`` is the transition (with its ``"next"`` entries: what a collector or a
        rollout stores), ``tensordict_`` the next root (what the policy reads next). Either may
        be edited in place; both are returned. Current torchrl runs the chain from
        ``step_and_maybe_reset`` and ``rollout``; here `TransformedEnv._post_step_mdp_hooks`
        exposes it (None while no transform of the env overrides this method).
        """
        return tensordict, tensordict_

    @property
    def has_post_step_mdp_hooks(self) -> bool:
        """Whether ``_post_step_mdp_hooks`` does something (it is overridden)."""
        return type(self)._post_step_mdp_hooks is not TransformHooks._post_step_mdp_hooks

    def transform_fake_tensordict(self, fake_tensordict: TensorDictBase) -> TensorDictBase:
        """Adjust the env's ``fake_tensordict`` (built from the specs) to what steps produce."""
        return fake_tensordict

    def _check_batched_worker_compat(self) -> None:
        """Raise if the transform must not run inside a batched env's worker (never, here)."""
        return None
