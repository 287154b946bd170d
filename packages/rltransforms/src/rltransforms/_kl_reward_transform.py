"""`KLRewardTransform`: a reward corrected by the divergence from a frozen reference actor."""

from __future__ import annotations

from collections.abc import Sequence
from copy import deepcopy
from typing import Any

import torch
from tensordict import NestedKey, TensorDict, TensorDictBase, unravel_key
from tensordict.nn import ProbabilisticTensorDictModule, TensorDictParams
from torch import nn

from rlspecs import Composite, Unbounded

from ._base import Transform

__all__ = ["KLRewardTransform"]

KEYS_ERROR = "invalid in_keys / out_keys:\nin_keys={in_keys} \nout_keys={out_keys}"
ONE_KEY_ERROR = "Only one in_key/out_key is allowed, got in_keys={in_keys}, out_keys={out_keys}."
GRAD_BUFFER_ERROR = (
    "Encountered a value that requires gradients but is not an nn.Parameter instance."
)
NO_DIST_ERROR = (
    "KLRewardTransform: the actor must be a probabilistic tensordict module with a get_dist "
    "method (e.g. tensordict.nn.ProbabilisticTensorDictSequential), got {type}"
)
LOG_PROB_MISSING_ERROR = (
    "KLRewardTransform: the current policy's log-probability {key!r} is not in the step input "
    "(keys: {keys}); let the policy write it (return_log_prob=True) or set "
    "transform.sample_log_prob_key"
)
REWARD_SPEC_MISSING_ERROR = (
    "KLRewardTransform: in_key {key!r} is neither a reward nor an observation of the env "
    "(rewards: {rewards}; observations: {observations})"
)
KL_SHAPE_ERROR = (
    "KLRewardTransform: the log-probabilities have shape {kl}, which does not fit the reward's "
    "{reward}; the actor's distribution must give one log-probability per sample"
)
_DEFAULT_LOG_PROB_KEY = "sample_log_prob"


def _is_key(key: Any) -> bool:
    return isinstance(key, str) or (
        isinstance(key, tuple) and bool(key) and all(isinstance(k, str) for k in key)
    )


def _key_list(keys: Any) -> list[Any]:
    return [keys] if isinstance(keys, (str, tuple)) else list(keys)


def _path(key: NestedKey) -> tuple[str, ...]:
    return (key,) if isinstance(key, str) else tuple(key)


def _on_meta(value: torch.Tensor) -> torch.Tensor:
    # a Parameter stays one: some modules (RNNs) insist on Parameters
    if isinstance(value, nn.Parameter):
        return nn.Parameter(value.data.to("meta"), requires_grad=value.requires_grad)
    return value.data.to("meta")


def _log_prob_key(actor: nn.Module) -> NestedKey:
    """Where the actor writes its log-probability: the `log_prob_key` of its (last) tensordict
    probabilistic module, else torchrl 0.4's `SAMPLE_LOG_PROB_KEY` attribute, else 0.4's
    default `"sample_log_prob"`."""
    key: NestedKey = _DEFAULT_LOG_PROB_KEY
    for module in actor.modules():
        try:
            if isinstance(module, ProbabilisticTensorDictModule):
                key = module.log_prob_key
            elif hasattr(module, "SAMPLE_LOG_PROB_KEY"):
                key = module.SAMPLE_LOG_PROB_KEY
        except RuntimeError:  # several log-probabilities (composite distributions)
            continue
    return key


class KLRewardTransform(Transform):
    """Adds a KL term between the current policy and a frozen copy of `actor` to the reward.

    Used to keep a fine-tuned policy close to where it started (RLHF). At construction the
    actor's parameters are copied and frozen; at each step the frozen actor's distribution
    (`actor.get_dist`) scores the action taken, and the reward becomes
    `reward + coef * (log pi(a) - log pi_0(a))`, where `log pi(a)` is the log-probability the
    acting policy wrote (`sample_log_prob_key`: torchrl 0.4's `"sample_log_prob"`, or the
    `log_prob_key` of a tensordict probabilistic module) and `log pi_0(a)` the frozen actor's:
    a one-sample estimate of `KL[pi || pi_0]`. As in torchrl 0.4 the term is added; current
    torchrl subtracts it (a penalty): pass a negative `coef` for that.

    With `out_keys` other than the reward, the corrected reward is written there (an
    observation, 0 at reset) and the reward is left as it is. Outside an env, `t(td)` rewrites a
    transition (`td` holding the action, the log-probability, the actor's inputs and
    `("next", reward)`).

    Args:
        actor: a probabilistic tensordict module (`get_dist(td)` gives the action distribution).
        coef: the coefficient of the KL term (default 1.0).
        in_keys: the reward to correct (default `"reward"`; one key).
        out_keys: where to write the corrected reward (default: `in_keys`; one key).
        requires_grad: whether the frozen parameters are differentiable copies (then they are
            parameters of the transform and follow `to`; else they stay where they are).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import ProbabilisticTensorDictModule as Prob
        >>> from tensordict.nn import ProbabilisticTensorDictSequential as Seq
        >>> from tensordict.nn import TensorDictModule as Mod
        >>> loc = Mod(torch.nn.Linear(1, 1, bias=False), in_keys=["obs"], out_keys=["loc"])
        >>> torch.nn.init.zeros_(loc.module.weight)
        Parameter containing:
        tensor([[0.]], requires_grad=True)
        >>> actor = Seq(loc, Prob(in_keys=["loc"], out_keys=["action"],
        ...     distribution_class=torch.distributions.Normal,
        ...     distribution_kwargs={"scale": 1.0}, return_log_prob=True))
        >>> t = KLRewardTransform(actor, coef=0.5, out_keys=["reward_kl"])
        >>> step = TensorDict({"obs": torch.ones(1), "action": torch.ones(1),
        ...     "action_log_prob": torch.zeros(1), "next": {"reward": torch.zeros(1)}})
        >>> t(step)["next", "reward_kl"]  # 0.5 * (0 - log N(1; 0, 1)) = 0.5 * 1.4189
        tensor([0.7095])
    """

    DEFAULT_IN_KEYS = ["reward"]

    def __init__(
        self,
        actor: ProbabilisticTensorDictModule | nn.Module,
        coef: float | torch.Tensor = 1.0,
        in_keys: Sequence[NestedKey] | NestedKey | None = None,
        out_keys: Sequence[NestedKey] | NestedKey | None = None,
        requires_grad: bool = False,
    ) -> None:
        in_keys = list(self.DEFAULT_IN_KEYS) if in_keys is None else _key_list(in_keys)
        out_keys = list(in_keys) if out_keys is None else _key_list(out_keys)
        if not all(map(_is_key, in_keys)) or not all(map(_is_key, out_keys)):
            raise ValueError(KEYS_ERROR.format(in_keys=in_keys, out_keys=out_keys))
        if len(in_keys) != 1 or len(out_keys) != 1:
            raise ValueError(ONE_KEY_ERROR.format(in_keys=in_keys, out_keys=out_keys))
        if not callable(getattr(actor, "get_dist", None)):
            raise TypeError(NO_DIST_ERROR.format(type=type(actor).__name__))
        # the actor's inputs join the in_keys (torchrl 0.4), after the reward
        super().__init__(in_keys=[*in_keys, *actor.in_keys], out_keys=out_keys)
        params = TensorDict.from_module(actor)
        # a copy of the actor without parameters of its own: the frozen ones are put in per call
        with params.apply(_on_meta, filter_empty=False).to_module(actor):
            self.__dict__["functional_actor"] = deepcopy(actor)

        def frozen(value: torch.Tensor) -> torch.Tensor:
            if isinstance(value, nn.Parameter):
                return nn.Parameter(value.data.clone(), requires_grad=requires_grad)
            if value.requires_grad:
                raise ValueError(GRAD_BUFFER_ERROR)
            return value.clone()

        frozen_params = params.apply(frozen, filter_empty=False)
        if requires_grad:
            # registered as parameters of the transform (they follow `to`, `parameters()`)
            frozen_params = TensorDictParams(frozen_params, no_convert=True)
        self.frozen_params = frozen_params
        self._requires_grad = requires_grad
        self.sample_log_prob_key = _log_prob_key(self.functional_actor)
        self.register_buffer("coef", torch.as_tensor(coef))

    @property
    def _reward_key(self) -> NestedKey:
        return self.in_keys[0]

    @property
    def _out_key(self) -> NestedKey:
        return self.out_keys[0]

    # ------------------------------------------------------------------ data path
    def _call(self, tensordict: TensorDictBase) -> TensorDictBase:
        action = tensordict.get("action", None)
        if action is None:
            # a reset, or data without action: nothing to score
            parent = self.parent
            if self._out_key != self._reward_key and parent is not None:
                tensordict.set(self._out_key, parent.reward_spec.zero())
            return tensordict
        # frozen parameters are not differentiable unless requires_grad=True (to_module would
        # hand them to the actor as fresh Parameters that require gradients)
        with torch.set_grad_enabled(self._requires_grad and torch.is_grad_enabled()):
            with self.frozen_params.to_module(self.functional_actor):
                dist = self.functional_actor.get_dist(tensordict.clone(False))
            reference = dist.log_prob(action)
        current = tensordict.get(self.sample_log_prob_key, None)
        if current is None:
            keys = sorted(map(str, tensordict.keys(True, True)))
            raise KeyError(LOG_PROB_MISSING_ERROR.format(key=self.sample_log_prob_key, keys=keys))
        reward = tensordict.get(("next", *_path(self._reward_key)))
        # an unbiased estimate of KL[pi || pi_0] from the action pi took
        kl = current - reference
        batch = tensordict.batch_size
        if kl.numel() != reward.numel() and kl.shape[: len(batch)] == batch:
            # per-dimension log-probabilities (e.g. a Normal over the action's entries): the
            # log-probability of the action is their sum
            kl = kl.flatten(len(batch)).sum(-1)
        if kl.numel() != reward.numel():
            raise ValueError(KL_SHAPE_ERROR.format(kl=tuple(kl.shape), reward=tuple(reward.shape)))
        kl = kl.view_as(reward)
        tensordict.set(("next", *_path(self._out_key)), reward + self.coef * kl)
        return tensordict

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Rewrite a transition (action, log-probability, actor inputs, `("next", reward)`)."""
        return self._call(tensordict)

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        transition = tensordict.clone(False)
        transition.set("next", next_tensordict)
        return self._call(transition).get("next")

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        with self._tolerate_missing():
            return self._call(tensordict_reset)

    # ------------------------------------------------------------------ specs
    def transform_output_spec(self, output_spec: Composite) -> Composite:
        in_key, out_key = unravel_key(self._reward_key), unravel_key(self._out_key)
        rewards = output_spec["full_reward_spec"]
        observations = output_spec["full_observation_spec"]
        reward_keys = {unravel_key(k) for k in rewards.keys(True, True)}
        observation_keys = {unravel_key(k) for k in observations.keys(True, True)}
        if in_key in reward_keys:
            source = rewards[in_key]
        elif in_key in observation_keys:
            source = observations[in_key]
        else:
            raise KeyError(
                REWARD_SPEC_MISSING_ERROR.format(
                    key=in_key,
                    rewards=sorted(map(str, reward_keys)),
                    observations=sorted(map(str, observation_keys)),
                )
            )
        spec = Unbounded(shape=source.shape, device=source.device)
        if in_key == out_key and in_key in reward_keys:
            rewards[in_key] = spec  # the corrected reward is any real number
        else:
            observations[out_key] = spec
        return super().transform_output_spec(output_spec)

    def __repr__(self) -> str:
        return (
            f"KLRewardTransform(coef={float(self.coef)}, in_keys={self.in_keys[:1]}, "
            f"out_keys={self.out_keys})"
        )
