"""SerialEnv: several envs stepped one after the other in this process."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from tensordict import TensorDictBase

from rlcore import EnvBase, placeholder_next
from rlcore.step_inputs import ACTION, STATE

from . import _tensordict_ops
from ._batched_base import BatchedEnvBase, move, step_function
from ._serial_steppers import SerialStepper, SteppedBatch, note_sub_env

__all__ = ["SerialEnv"]


class SerialEnv(BatchedEnvBase):
    """Runs ``num_workers`` envs in the current process and batches their data.

    Gradients flow through it: a rollout through a SerialEnv is the stack of the
    single envs' rollouts. A step's input is checked as in ``ParallelEnv`` (every action leaf
    present, exact shapes, values that fit the spec's dtype); after ``close()``, stepping
    raises ``rlcore.EnvClosedError`` until ``reset()``.

    Stepper path: when every sub-env offers a stepper with the same layout (every unbatched
    ``GymEnv``: ``rlcore.Stepper``), steps and resets write each sub-env's results straight
    into the batched tensors (``rlbatched._serial_steppers``), with the same results as the
    general path, which stacks one tensordict per sub-env and runs for anything else. A
    rollout then runs ``EnvBase.rollout``'s stepper loop over the sub-env steppers as one
    (``SerialStepper``) where their resets read no input, as for a vector ``GymEnv``.

    ``use_buffers=False`` (the default for sub-envs with dynamic specs) leaves the stepper path
    out and stacks the sub-envs' outputs as they come: densely where they stack, else lazily
    (sub-envs whose data change shape between steps).

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
        use_buffers: bool | None = None,
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
            use_buffers=use_buffers,
        )
        self._envs: list[EnvBase] | None = None
        self._reset_templates: list[TensorDictBase] | None = None
        self._stepped: SteppedBatch | None = None
        self._steppers_allowed = True  # False: the general path always (tests compare the two)
        self.is_closed = True

    def _started(self) -> bool:
        return self._envs is not None

    def _start_workers(self) -> None:
        self._envs = [fn(**kw) for fn, kw in zip(self.create_env_fn, self.create_env_kwargs)]
        self._env_devices = [env.device for env in self._envs]
        self._plan_steps()
        self.is_closed = False

    def _plan_steps(self) -> None:
        """Decide how the sub-envs are stepped: through their steppers where all offer one
        (``SteppedBatch``), else one by one."""
        envs = self._envs
        self._step_fns = [
            step_function(env, post_process=self._lazy_stack or env._run_type_checks)
            for env in envs
        ]
        self._stepped = None
        if self._steppers_allowed and self._use_buffers and not self._lazy_stack:
            self._stepped = SteppedBatch.build(self, envs)
        self.empty_cache()  # a stepper made from the old plan (_stepper) goes with it

    def _current_stepped(self) -> SteppedBatch | None:
        """The stepped batch, decided again first if a sub-env's specs changed since."""
        stepped = self._stepped
        if stepped is not None and not stepped.current():
            self._plan_steps()
            stepped = self._stepped
        return stepped

    def _stepper(self) -> SerialStepper | None:
        """The sub-envs' steppers as one (``SerialStepper``), for the rollout's stepper loop:
        where the stepper path applies, on this env's device, with resets reading no input."""
        if self._must_reset:  # closed: starting again is a reset's to do (it plans anew)
            return None
        self.start()
        stepped = self._current_stepped()
        if stepped is None or stepped.reset_reads_input or stepped.device != self.device:
            return None
        return SerialStepper(stepped, self._open_for_step)

    def close(self) -> None:
        """Close every sub-env; ``reset`` creates them again (``step`` raises until then)."""
        envs, self._envs = self._envs, None
        self._stepped = None
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

    # a "_step" mask steps the flagged sub-envs only (rlcore._partial_steps)
    _supports_partial_steps = True

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        self._check_batch(tensordict)
        self._open_for_step()
        mask = tensordict.get("_step", None)
        if mask is not None:
            return self._partial_step_rows(tensordict.exclude("_step"), mask)
        stepped = self._current_stepped()
        if stepped is not None:
            return self._to_out_device(stepped.step(tensordict))
        tds = _tensordict_ops.unbind(tensordict)
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

    def _partial_step_rows(self, tensordict: TensorDictBase, mask: torch.Tensor) -> TensorDictBase:
        """The sub-envs ``mask`` flags step; the others give ``placeholder_next`` (the input's
        observations and done flags, a zero reward)."""
        rows = mask.reshape(self.num_workers, -1).any(-1).tolist()
        outs = []
        try:
            for index, (env, step, td) in enumerate(
                zip(self._envs, self._step_fns, _tensordict_ops.unbind(tensordict))
            ):
                if env.device is not None and td.device != env.device:
                    td = move(td, env.device, self.non_blocking)
                outs.append(step(td) if rows[index] else placeholder_next(env, td))
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
        stepped = None if kwargs else self._current_stepped()
        if stepped is not None:
            out = stepped.reset(tensordict, needs, self._template_device())
            if out is not None:
                self._must_reset = False
                return self._to_out_device(out)
        tds = tensordict.unbind(0) if tensordict is not None else [None] * self.num_workers
        if self._reset_templates is None:
            self._reset_keys_out = [self._reset_output_keys(i) for i in range(self.num_workers)]
            self._reset_templates = [meta.reset_zeros() for meta in self._metas]
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

    def _template_device(self) -> torch.device | None:
        """The device of the zero templates the rows not reset take (``reset_zeros``)."""
        device = self.__dict__.get("_template_device_cache", False)
        if device is False:
            device = self._metas[0].reset_zeros().device
            self.__dict__["_template_device_cache"] = device
        return device

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
