"""SerialEnv: several envs stepped one after the other in this process."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from tensordict import TensorDictBase

from rlcore import EnvBase

from . import _td_fast
from ._batched_base import BatchedEnvBase, move, step_function
from ._dense import DenseBatch, note_sub_env
from ._inputs import ACTION, STATE

__all__ = ["SerialEnv"]


class SerialEnv(BatchedEnvBase):
    """Runs ``num_workers`` envs in the current process and batches their data.

    Gradients flow through it: a rollout through a SerialEnv is the stack of the
    single envs' rollouts. A step's input is checked as in ``ParallelEnv`` (every action leaf
    present, exact shapes, values that fit the spec's dtype); after ``close()``, stepping
    raises ``rlcore.EnvClosedError`` until ``reset()``.

    Fast path: when every sub-env offers a dense stepper with the same layout (every unbatched
    ``GymEnv``: ``rlcore.DenseStepper``), steps and resets write each sub-env's results
    straight into the batched tensors (``rlbatched._dense``), with the same results as the
    general path, which stacks one tensordict per sub-env and runs for anything else.

    Arguments are ``ParallelEnv``'s, less those about processes (see its docstring).

    Examples:
        >>> from rlbatched import SerialEnv
        >>> from rlmocks import ContinuousActionVecMockEnv
        >>> env = SerialEnv(2, ContinuousActionVecMockEnv)
        >>> env.rollout(3).batch_size
        torch.Size([2, 3])
    """

    def __init__(
        self,
        num_workers: int,
        create_env_fn: Callable[..., EnvBase] | Sequence[Callable[..., EnvBase]],
        create_env_kwargs: dict | Sequence[dict] | None = None,
        share_individual_td: bool | None = None,
        shared_memory: bool = True,
        device: torch.device | str | int | None = None,
        serial_for_single: bool = False,
        *,
        pin_memory: bool = False,
        memmap: bool = False,
        policy_proof: Callable | None = None,
        allow_step_when_done: bool = False,
        non_blocking: bool = False,
    ):
        super().__init__(
            num_workers,
            create_env_fn,
            create_env_kwargs,
            share_individual_td=share_individual_td,
            shared_memory=shared_memory,
            device=device,
            serial_for_single=serial_for_single,
            pin_memory=pin_memory,
            memmap=memmap,
            policy_proof=policy_proof,
            allow_step_when_done=allow_step_when_done,
            non_blocking=non_blocking,
        )
        self._envs: list[EnvBase] | None = None
        self._reset_templates: list[TensorDictBase] | None = None
        self._dense: DenseBatch | None = None
        self._dense_allowed = True  # False: the general path always (tests compare the two)
        self.is_closed = True

    def _started(self) -> bool:
        return self._envs is not None

    def _start_workers(self) -> None:
        self._envs = [fn(**kw) for fn, kw in zip(self.create_env_fn, self.create_env_kwargs)]
        self._env_devices = [env.device for env in self._envs]
        self._plan_steps()
        self.is_closed = False

    def _plan_steps(self) -> None:
        """Decide how the sub-envs are stepped: densely where all offer it, else one by one."""
        envs = self._envs
        self._step_fns = [
            step_function(env, post_process=self._lazy_stack or env._run_type_checks)
            for env in envs
        ]
        self._dense = None
        if self._dense_allowed and not self._lazy_stack:
            meta = self._metas[0]
            self._dense = DenseBatch.build(
                envs, self.batch_size, self._reset_output_keys(0), self._zero_reset_td(meta)
            )

    def _current_dense(self) -> DenseBatch | None:
        """The dense batch, decided again first if a sub-env's specs changed since."""
        dense = self._dense
        if dense is not None and not dense.current():
            self._plan_steps()
            dense = self._dense
        return dense

    def close(self) -> None:
        """Close every sub-env; ``reset`` creates them again (``step`` raises until then)."""
        envs, self._envs = self._envs, None
        self._dense = None
        self.is_closed = True
        if envs is not None:
            self._must_reset = True
        for env in envs or ():
            env.close()

    def set_seed(self, seed: int | None = None, static_seed: bool = False) -> int | None:
        """Seed sub-env i with the seed returned by sub-env i-1; return the last one."""
        self.start()
        for env in self._envs:
            seed = env.set_seed(seed, static_seed=static_seed)
        return seed

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        self._check_batch(tensordict)
        self._open_for_step()
        self._check_inputs(tensordict, "step", (ACTION, STATE))
        dense = self._current_dense()
        if dense is not None:
            return self._to_out_device(dense.step(tensordict))
        tds = _td_fast.unbind(tensordict)
        in_device = tensordict.device
        if any(d is not None and d != in_device for d in self._env_devices):
            nb = self.non_blocking
            tds = [td if d is None else move(td, d, nb) for td, d in zip(tds, self._env_devices)]
        outs = []
        try:
            for step, td in zip(self._step_fns, tds):
                outs.append(step(td))
        except Exception as err:
            note_sub_env(err, len(outs), "step")
            raise
        return self._to_out_device(self._stack(outs))

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs) -> TensorDictBase:
        masks = self._reset_masks(tensordict)
        self._open_for_reset(masks)
        if tensordict is not None:
            self._check_inputs(tensordict, "reset", (ACTION, STATE))
        needs = self._workers_to_reset(masks)
        dense = None if kwargs else self._current_dense()
        if dense is not None:
            out = dense.reset(tensordict, needs)
            if out is not None:
                self._must_reset = False
                return self._to_out_device(out)
        tds = tensordict.unbind(0) if tensordict is not None else [None] * self.num_workers
        if self._reset_templates is None:
            self._reset_keys_out = [self._reset_output_keys(i) for i in range(self.num_workers)]
            self._reset_templates = [self._zero_reset_td(meta) for meta in self._metas]
        outs = []
        index = 0
        try:
            for index, (env, td) in enumerate(zip(self._envs, tds)):
                keys = self._reset_keys_out[index]
                if needs[index]:
                    if td is not None and env.device is not None and td.device != env.device:
                        td = move(td, env.device, self.non_blocking)
                    out = env.reset(td, **kwargs).select(*keys, strict=False)
                else:
                    out = (
                        self._reset_templates[index].clone().update(td.select(*keys, strict=False))
                    )
                outs.append(out)
        except Exception as err:
            note_sub_env(err, index, "reset")
            raise
        self._must_reset = False
        return self._to_out_device(self._stack(outs))

    @staticmethod
    def _zero_reset_td(meta) -> TensorDictBase:
        out = meta.output_spec["full_observation_spec"].zero()
        out.update(meta.output_spec["full_done_spec"].zero())
        out.update(meta.input_spec["full_state_spec"].zero())
        return out

    def _to_out_device(self, td: TensorDictBase) -> TensorDictBase:
        if self.device is not None and td.device != self.device:
            return move(td, self.device, self.non_blocking)
        return td

    def _forward_attr(self, name: str) -> Any:
        values = [getattr(env, name) for env in self._envs]
        if values and all(callable(value) for value in values):

            def call_each(*args, **kwargs):
                return [value(*args, **kwargs) for value in values]

            return call_each
        return values
