"""Shared start of the commands that launch runs (`materialize`, `rollback`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dagster import DagsterInstance, Definitions

    from brain_pipeline.config import BrainConfig


def location_and_instance(cfg: BrainConfig) -> tuple[Definitions, DagsterInstance]:
    """The code location built for `cfg` and the instance a command-line run uses (no
    compute-log capture, `lib.instance.CLI_RUN_OVERRIDES`), for the commands that launch
    runs; the `gemini_embedding` pool gets its one slot if nothing limits it yet.

    Dagster, its storage layer and the location load with cyclic collection paused and are
    frozen after (`utils.startup`): about a third of a CPU-second less per command."""
    from brain_pipeline.utils.startup import imports_without_collection

    with imports_without_collection():
        from brain_pipeline.definitions import build_definitions
        from brain_pipeline.lib.instance import (
            ensure_instance_home,
            ensure_pool_limit,
            open_instance,
        )

        definitions = build_definitions(config=cfg)
        ensure_instance_home(cfg.instance_home())
        instance = open_instance(cfg.build_dir, cli_run=True)
        # Silent here (a run's output is the run's); `brain-pipeline ui` says it, and
        # docs/operations.md says how to change it.
        ensure_pool_limit(instance)
        return definitions, instance
