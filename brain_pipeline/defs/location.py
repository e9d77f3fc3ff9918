"""The code location the UI and `dg dev` load (workspace.yaml, [tool.dg] in pyproject).

Loading it reaps runs a killed process left "in progress" (they would hold their queue
place and pool slots). That side effect lives here, not in `definitions`, because the
CLI and the tests import `definitions` too: the CLI reaps under its own lock, where it
can say what it did.
"""

from brain_pipeline.defs.definitions import defs
from brain_pipeline.instance import reap_dead_runs_on_load

reap_dead_runs_on_load()

__all__ = ["defs"]
