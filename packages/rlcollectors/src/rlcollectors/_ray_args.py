"""RayCollector's arguments: checked and spread into one set per actor before Ray is asked."""

from __future__ import annotations

from typing import Any

from rlcore import EnvBase

from ._multi_sync import MultiSyncDataCollector
from ._sync import SyncDataCollector

_BAD_ENV_FNS = (
    "create_env_fn must be an env factory (a callable) or a list of them, got {value!r}; "
    "actors build their own envs, so pass e.g. `lambda: MyEnv()` rather than an env."
)
_BAD_LENGTH = "{name} has {got} entries but there are {n} collectors; give one per collector."
_BAD_FRAMES = (
    "frames_per_batch={frames} cannot be split into chunks of whole envs: {why}; pick a multiple."
)
_BAD_CLASS = (
    "collector_class must be SyncDataCollector, MultiSyncDataCollector, a subclass of one, "
    "'single' or 'sync', got {value!r}."
)
_BAD_WORKERS = (
    "num_workers_per_collector={n} needs collector_class=MultiSyncDataCollector; "
    "a SyncDataCollector runs one env factory."
)
_RESERVED_KWARG = (
    "collector_kwargs[{idx}] sets {key!r}, which RayCollector sets too; give it in one place "
    "(frames_per_batch and total_frames only to RayCollector)."
)
_BAD_RETRIES = (
    "remote_configs[{idx}] sets max_task_retries={value!r}; RayCollector needs 0 (a retried "
    "chunk call would run before the actor gets the current weights back) and restarts lost "
    "actors itself (see max_restarts)."
)
_BAD_RESTARTS = "remote_configs[{idx}]['max_restarts'] must be an int >= -1, got {value!r}."
_SPLIT_NEEDS_STACK = (
    "split_trajs=True with collector_class=MultiSyncDataCollector needs its "
    "cat_results='stack' (got {value!r}): concatenated workers share trajectory ids."
)

DEFAULT_REMOTE_CONFIG: dict[str, Any] = {"num_cpus": 1, "max_restarts": 3}
_COLLECTOR_CLASSES = {"single": SyncDataCollector, "sync": MultiSyncDataCollector}
_RESERVED = ("frames_per_batch", "total_frames")


def per_collector(value: Any, n: int, name: str) -> list[Any]:
    """``value`` once per collector: a list or tuple as it is (checking its length), else repeated."""
    if isinstance(value, list | tuple):
        if len(value) != n:
            raise ValueError(_BAD_LENGTH.format(name=name, got=len(value), n=n))
        return list(value)
    return [value] * n


def env_fns(create_env_fn: Any, num_collectors: int | None) -> list[Any]:
    """One env factory per collector (``num_collectors`` of them when given)."""
    fns = list(create_env_fn) if isinstance(create_env_fn, list | tuple) else [create_env_fn]
    if not fns or any(isinstance(fn, EnvBase) or not callable(fn) for fn in fns):
        raise TypeError(_BAD_ENV_FNS.format(value=create_env_fn))
    if num_collectors is None:
        return fns
    if len(fns) == 1:
        return fns * num_collectors
    if len(fns) != num_collectors:
        raise ValueError(_BAD_LENGTH.format(name="create_env_fn", got=len(fns), n=num_collectors))
    return fns


def collector_class(value: Any, workers: int) -> type:
    """The collector class the actors run: ours, a subclass, or torchrl's names for them."""
    cls = _COLLECTOR_CLASSES.get(value, value) if isinstance(value, str) else value
    if not (isinstance(cls, type) and issubclass(cls, SyncDataCollector | MultiSyncDataCollector)):
        raise ValueError(_BAD_CLASS.format(value=value))
    if workers != 1 and not issubclass(cls, MultiSyncDataCollector):
        raise ValueError(_BAD_WORKERS.format(n=workers))
    return cls


def chunk_frames(frames: Any, n: int, sync: bool, workers: int) -> int:
    """Frames per actor call: a share of ``frames_per_batch`` when ``sync``, all of it otherwise."""
    if not isinstance(frames, int) or frames <= 0:
        raise ValueError(_BAD_FRAMES.format(frames=frames, why="it must be a positive int"))
    if sync and frames % n:
        why = f"sync=True gives each of the {n} collectors an equal share"
        raise ValueError(_BAD_FRAMES.format(frames=frames, why=why))
    chunk = frames // n if sync else frames
    if chunk % workers:
        why = f"each chunk of {chunk} frames is shared by {workers} workers"
        raise ValueError(_BAD_FRAMES.format(frames=frames, why=why))
    return chunk


def actor_kwargs(
    cls: type, kwargs: Any, n: int, chunk: int, split_trajs: bool, ours: dict[str, list[Any]]
) -> list[dict[str, Any]]:
    """Each actor's collector kwargs: ``collector_kwargs`` plus ours (``None``: not given)."""
    out = []
    for idx, given in enumerate(per_collector(kwargs or {}, n, "collector_kwargs")):
        given = dict(given)
        for key in _RESERVED:
            if key in given:
                raise ValueError(_RESERVED_KWARG.format(idx=idx, key=key))
        for key, values in ours.items():
            if values[idx] is None:
                continue
            if key in given:
                raise ValueError(_RESERVED_KWARG.format(idx=idx, key=key))
            given[key] = values[idx]
        given["frames_per_batch"] = chunk
        if issubclass(cls, MultiSyncDataCollector):
            given.setdefault("cat_results", "stack")
            if split_trajs and given["cat_results"] != "stack":
                raise ValueError(_SPLIT_NEEDS_STACK.format(value=given["cat_results"]))
        out.append(given)
    return out


def remote_options(configs: Any, n: int) -> list[dict[str, Any]]:
    """Each actor's ``ray.remote`` options, ``max_restarts`` always set (our budget and Ray's)."""
    out = []
    for idx, config in enumerate(
        per_collector(DEFAULT_REMOTE_CONFIG if configs is None else configs, n, "remote_configs")
    ):
        config = dict(config)
        if config.get("max_task_retries", 0) != 0:
            raise ValueError(_BAD_RETRIES.format(idx=idx, value=config["max_task_retries"]))
        budget = config.setdefault("max_restarts", DEFAULT_REMOTE_CONFIG["max_restarts"])
        if not isinstance(budget, int) or budget < -1:
            raise ValueError(_BAD_RESTARTS.format(idx=idx, value=budget))
        out.append(config)
    return out
