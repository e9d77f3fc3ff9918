"""The one Dagster instance folder shared by the CLI and the web UI (no Dagster import).

Runs launched by `brain-pipeline materialize` must show up in the UI's run history, and
a later run must be able to read an earlier check's result, so both use the same
DAGSTER_HOME: the variable when set, otherwise a project-local folder created on first
use with the first-visit dialog and telemetry switched off.
"""

from __future__ import annotations

import os
from pathlib import Path

INSTANCE_YAML = """\
# Created by brain-pipeline on first use.
telemetry:
  enabled: false
nux:
  enabled: false
"""


def ensure_instance_home(home: Path) -> Path:
    """Create `home` with a dagster.yaml if missing, and point DAGSTER_HOME at it."""
    home = home.expanduser().resolve()
    home.mkdir(parents=True, exist_ok=True)
    settings = home / "dagster.yaml"
    if not settings.exists():
        settings.write_text(INSTANCE_YAML, encoding="utf-8")
    os.environ["DAGSTER_HOME"] = str(home)
    return home
