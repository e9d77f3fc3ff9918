"""`brain-pipeline ui`: the Dagster web UI on this project's shared instance."""

from __future__ import annotations

import argparse
import errno
import ipaddress
import os
import shutil
import signal
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from brain_pipeline.cli import CommandError, configuration

if TYPE_CHECKING:
    from brain_pipeline.config import BrainConfig

HELP = "open the Dagster UI (dg dev) on the same instance the CLI uses"
DESCRIPTION = """\
Start `dg dev -w workspace.yaml` (or `dagster dev -w workspace.yaml` where the dg command
is not installed) with DAGSTER_HOME set to the project's instance (DAGSTER_HOME when set,
else .dagster_home/ beside corpus_config.yaml), so runs started by `brain-pipeline
materialize` appear in the UI's history. The code location is named `brain_pipeline`
(workspace.yaml beside the configuration; for a configuration elsewhere, one written into
the build directory's state folder, never into DAGSTER_HOME). A busy port is refused at
once: choose another with -p PORT. Stop it with Ctrl-C.
"""

Which = Callable[[str], str | None]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)"
    )
    parser.add_argument("-p", "--port", type=int, default=3000, help="port (default 3000)")


def dev_command(
    workspace: Path, host: str, port: int, which: Which = shutil.which
) -> list[str] | None:
    """The web UI's command line: `dg dev` when dg is installed, else `dagster dev`.

    Both read the same workspace.yaml, so the code location has the same name either way.
    `dg dev -w` goes straight to Dagster's dev server without the `dagster dev` entry
    point, which would print that it is superseded by `dg dev`. None when neither exists.
    """
    for program in ("dg", "dagster"):
        path = which(program)
        if path is not None:
            return [path, "dev", "-w", str(workspace), "-h", host, "-p", str(port)]
    return None


def exposure_warning(host: str, port: int) -> str | None:
    """The warning for a listening address other hosts can reach, or None for loopback.

    The Dagster UI has no authentication: whoever reaches the port can launch runs, set
    their config and wipe assets. Only loopback addresses (127.0.0.0/8, ::1, localhost)
    are quiet; a host name other than localhost cannot be judged without resolving it,
    so it is warned about too.
    """
    name = host.strip().strip("[]").lower()
    if name == "localhost":
        return None
    try:
        if ipaddress.ip_address(name).is_loopback:
            return None
    except ValueError:
        pass
    return (
        f"warning: the Dagster UI has no authentication; anyone who can reach {host}:{port} "
        "can launch runs and set their config: keep it on 127.0.0.1 behind a reverse proxy "
        "with authentication (docs/ui.md)"
    )


def port_problem(host: str, port: int) -> str | None:
    """Why the web UI could not listen on host:port, or None when it can.

    Checked before starting it: on a busy port `dagster dev` logs "address already in
    use" and then hangs instead of exiting.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        # As a server binds: an old connection in TIME_WAIT does not count as busy.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return f"port {port} on {host} is in use; choose another with -p PORT"
            return f"cannot listen on {host}:{port}: {exc.strerror or exc}"
    return None


def workspace_for(cfg: BrainConfig) -> Path:
    """The workspace.yaml the UI loads, wherever the configuration lives.

    The project's own file sits beside its corpus_config.yaml; a configuration kept
    elsewhere (BRAIN_CONFIG=~/my-corpus/config.yaml) has none beside it, so one naming
    the same code location is written into the build directory's state folder (never
    into DAGSTER_HOME, which is the user's; atomically, only when its bytes change), its
    working directory the folder this package is imported from.
    """
    beside = cfg.base_dir / "workspace.yaml"
    if beside.is_file():
        return beside
    from brain_pipeline.utils.atomic import write_if_changed

    package_root = Path(__file__).resolve().parents[2]
    document = {
        "load_from": [
            {
                "python_module": {
                    "module_name": "brain_pipeline.definitions",
                    "working_directory": str(package_root),
                    "location_name": "brain_pipeline",
                }
            }
        ]
    }
    target = cfg.layout.state_dir / "workspace.yaml"
    text = "# Written by `brain-pipeline ui` for a configuration outside the project.\n"
    write_if_changed(target, (text + yaml.safe_dump(document, sort_keys=False)).encode())
    return target


def run(args: argparse.Namespace) -> int:
    from brain_pipeline.lib.instance import ensure_instance_home

    cfg = configuration()
    warning = exposure_warning(args.host, args.port)
    if warning is not None:
        print(f"brain-pipeline ui: {warning}", file=sys.stderr)
    problem = port_problem(args.host, args.port)
    if problem is not None:
        raise CommandError(problem)
    home = ensure_instance_home(cfg.instance_home())
    workspace = workspace_for(cfg)
    command = dev_command(workspace, args.host, args.port)
    if command is None:
        raise CommandError("neither `dg` nor `dagster` is installed: pip install dagster-dg-cli")
    if cfg.config_path is not None:
        # The code server re-reads the configuration: the same file, whatever its cwd.
        os.environ["BRAIN_CONFIG"] = str(cfg.config_path)
    # Create the instance's storage before the webserver, daemon and code server all
    # race to, and fail the runs a killed process left in progress (they would hold
    # their pool slots for ever). The gemini_embedding pool gets its one slot if unlimited.
    from brain_pipeline.lib.instance import (
        ensure_pool_limit,
        open_instance,
        reap_dead_runs,
        reaped_message,
    )

    instance = open_instance(cfg.build_dir)
    said = ensure_pool_limit(instance)
    if said:
        print(f"brain-pipeline ui: {said}", file=sys.stderr)
    for dead in reap_dead_runs(instance):
        print(f"brain-pipeline ui: {reaped_message(dead)}", file=sys.stderr)
    program = Path(command[0]).name
    print(
        f"Dagster UI on http://{args.host}:{args.port} ({program} dev, instance {home}, "
        f"workspace {workspace}; it answers after 10-20 s)",
        file=sys.stderr,
    )
    if program != "dg":
        print("brain-pipeline: `dg` is not installed; using `dagster dev`", file=sys.stderr)
    os.chdir(cfg.base_dir)
    # `dagster dev` (which `dg dev` runs) treats SIGTERM like SIGINT, and a process started
    # in the background of a non-interactive shell inherits SIGINT *ignored*: it would then
    # ignore both. Restore the defaults so `kill` and Ctrl-C stop the UI wherever it was
    # started from.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.execv(command[0], command)
    return 0  # pragma: no cover - execv does not return
