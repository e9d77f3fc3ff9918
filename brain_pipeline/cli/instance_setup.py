"""Shared start of the commands that use the Dagster instance (`materialize`, `ui`)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from brain_pipeline.config import BrainConfig


def configured_instance(command: str) -> BrainConfig | None:
    """Load the configuration and point DAGSTER_HOME at the shared instance.

    Returns None after printing the configuration error, so the caller exits with 2.
    """
    from brain_pipeline.config import ConfigError, load_config
    from brain_pipeline.lib.instance import ensure_instance_home

    try:
        cfg = load_config()
    except ConfigError as exc:
        print(f"brain-pipeline {command}: {exc}", file=sys.stderr)
        return None
    ensure_instance_home(cfg.instance_home())
    return cfg
