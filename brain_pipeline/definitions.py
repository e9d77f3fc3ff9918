"""The code location: `@dg.definitions` for `dg` and workspace.yaml; `build_definitions`
for the CLI and the tests. Both load the `defs/` folder through Dagster's component tree,
the way `dg` does, so whatever `dg scaffold defs` writes there is live.

They build the tree from the `defs` package itself rather than through
`load_from_defs_folder`, which also parses pyproject.toml with tomlkit and attaches a
catalogue of every installed component type (JSON schemas of each) to the definitions:
a tenth of a CPU-second per load that no run, and nothing this project shows, reads.

Loading has no side effect: nothing is read from or written to the instance (dead runs
are reaped by the commands that own the instance: `brain-pipeline ui` before it starts
the web UI, `brain-pipeline materialize` under its lock).
"""

from __future__ import annotations

import warnings
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
    import brain_pipeline.defs as defs_package

    with building_for(config_path, config), warnings.catch_warnings():
        # The tree loads each module with a function Dagster marks as preview.
        warnings.simplefilter("ignore", category=dg.PreviewWarning)
        tree = dg.ComponentTree.from_module(defs_module=defs_package, project_root=_PROJECT.parent)
        return tree.build_defs_at_path(Path("."))


@dg.definitions
def defs() -> dg.Definitions:
    """What `dg dev`, `dg list defs` and workspace.yaml load."""
    return build_definitions()
