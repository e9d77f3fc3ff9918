"""The code location: `@dg.definitions` for `dg` and workspace.yaml; `build_definitions`
for the CLI and the tests. Both load the `defs/` folder the way `dg` does, so whatever
`dg scaffold defs` writes there is live.

Loading has no side effect: nothing is read from or written to the instance (dead runs
are reaped by the commands that own the instance: `brain-pipeline ui` before it starts
the web UI, `brain-pipeline materialize` under its lock).
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from brain_pipeline.config import BrainConfig
from brain_pipeline.lib.code_location import building_for

_PROJECT = Path(__file__).resolve().parent


def build_definitions(
    config_path: str | None = None, *, config: BrainConfig | None = None
) -> dg.Definitions:
    """Definitions for one configuration file (None: BRAIN_CONFIG or ./corpus_config.yaml).

    Code versions, kinds and the automation's defaults are read from the configuration
    when the code location loads (a change of model or junk limits is a code-version
    change Dagster shows); a run reads it once when it starts (defs/resources.py).
    `config`: the configuration the caller has already read from that file (the CLI),
    so the load does not read it again.
    """
    with building_for(config_path, config):
        return dg.load_from_defs_folder(path_within_project=_PROJECT)


@dg.definitions
def defs() -> dg.Definitions:
    """What `dg dev`, `dg list defs` and workspace.yaml load."""
    return build_definitions()
