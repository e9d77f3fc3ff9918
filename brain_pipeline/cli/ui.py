"""`brain-pipeline ui`: the Dagster web UI on this project's shared instance."""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys

HELP = "open the Dagster UI (dagster dev) on the same instance the CLI uses"
DESCRIPTION = """\
Start `dagster dev -w workspace.yaml` with DAGSTER_HOME set to the project's instance
(DAGSTER_HOME when set, else .dagster_home/ beside corpus_config.yaml), so runs started by
`brain-pipeline materialize` appear in the UI's history. Stop it with Ctrl-C.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)"
    )
    parser.add_argument("-p", "--port", type=int, default=3000, help="port (default 3000)")


def run(args: argparse.Namespace) -> int:
    from brain_pipeline.cli.instance_setup import configured_instance

    cfg = configured_instance("ui")
    if cfg is None:
        return 2
    home = cfg.instance_home()
    workspace = cfg.base_dir / "workspace.yaml"
    dagster = shutil.which("dagster")
    if dagster is None:
        print("brain-pipeline: the `dagster` command is not installed", file=sys.stderr)
        return 2
    # Create the instance's storage before the webserver, daemon and code server all
    # race to, and fail the runs a killed process left in progress (they would hold
    # their build directory's place in the queue and their pool slots for ever).
    from brain_pipeline.instance import open_instance, reap_dead_runs

    for dead in reap_dead_runs(open_instance()):
        print(
            f"brain-pipeline ui: marked run {dead.run_id} failed: its process "
            f"(pid {dead.pid} on {dead.host}) is gone",
            file=sys.stderr,
        )
    print(f"Dagster UI on http://{args.host}:{args.port} (instance {home})", file=sys.stderr)
    os.chdir(cfg.base_dir)
    command = [dagster, "dev", "-w", str(workspace), "-h", args.host, "-p", str(args.port)]
    # `dagster dev` treats SIGTERM like SIGINT, and a process started in the background of
    # a non-interactive shell inherits SIGINT *ignored*: it would then ignore both. Restore
    # the defaults so `kill` and Ctrl-C stop the UI wherever it was started from.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.execv(dagster, command)
    return 0  # pragma: no cover - execv does not return
