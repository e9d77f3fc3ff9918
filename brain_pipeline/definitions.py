"""The code location: `@dg.definitions` for `dg` and workspace.yaml; `build_definitions`
for the CLI and the tests. Both load the `defs/` folder through Dagster's component tree,
the way `dg` does, so whatever `dg scaffold defs` writes there is live.

They build the tree from the `defs` package itself rather than through
`load_from_defs_folder`, which also parses pyproject.toml with tomlkit and attaches a
catalogue of every installed component type (JSON schemas of each) to the definitions:
0.08 CPU-s per load that no run, and nothing this project shows, reads. That tree is
not public API, so it is built in `lib.dagster_private`.

Loading has no side effect: nothing is read from or written to the instance (dead runs
are reaped by the commands that own the instance: `brain-pipeline ui` before it starts
the web UI, `brain-pipeline materialize` under its lock).
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from brain_pipeline.config import BrainConfig
from brain_pipeline.lib.code_location import building_for
from brain_pipeline.lib.dagster_private import definitions_of_defs_package

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
    import brain_pipeline.defs as defs_package

    with building_for(config_path, config):
        return definitions_of_defs_package(defs_package, _PROJECT.parent)


@dg.definitions
def defs() -> dg.Definitions:
    """What `dg dev`, `dg list defs` and workspace.yaml load."""
    return build_definitions()
