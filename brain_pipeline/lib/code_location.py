"""Which configuration the code location is being built for, while `defs/` loads.

`definitions.build_definitions(config_path)` loads the `defs/` folder the way `dg`
does; each module's `@dg.definitions` function asks here for the configuration (code
versions, kinds, the schedule's cron and the sensors' intervals come from it). The
configuration is read once per load (a run reads it once more, when it starts: see
`defs/resources.py`). Outside a load — `dg` loading the folder by itself
— it is BRAIN_CONFIG, else ./corpus_config.yaml, as everywhere else.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from brain_pipeline.config import BrainConfig, load_config


@dataclass
class _Load:
    config_path: str | None
    config: BrainConfig | None = field(default=None)


_current: ContextVar[_Load | None] = ContextVar("brain_pipeline_location_load", default=None)
_loaded_paths: set[str | None] = set()
"""Every configuration path a location was built for in this process: a run's worker
loads its location before the run starts, so a run's resources may name only these."""


@contextmanager
def building_for(config_path: str | None, config: BrainConfig | None = None) -> Iterator[None]:
    """Within this block, `defs/` modules build for `config_path` (None: the default);
    `config`, when given, is that file as the caller already read it."""
    _loaded_paths.add(config_path)
    token = _current.set(_Load(config_path, config))
    try:
        yield
    finally:
        _current.reset(token)


def location_config_path() -> str | None:
    load = _current.get()
    return load.config_path if load is not None else None


def location_config() -> BrainConfig:
    load = _current.get()
    if load is None:
        return load_config(None)
    if load.config is None:
        load.config = load_config(load.config_path)
    return load.config


def was_loaded(config_path: str | None) -> bool:
    """Whether a code location of this process was built for `config_path` (a run's
    launch config could otherwise point the run at any file on the host)."""
    return config_path in _loaded_paths
