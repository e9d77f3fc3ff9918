"""The `brain-pipeline` command: a thin layer over the core.

Each sub-command lives in its own module `brain_pipeline.cli.<name>` exposing
`HELP: str`, `add_arguments(parser)` and `run(args) -> int`. Those modules import only
argparse at module level and pull in the core (and Dagster, for `materialize`) inside
`run`, so `--help`, `chunk`, `search`, `eval` and `bench` start fast.

A command that cannot go on raises `CommandError`: `main` prints each of its lines as
`brain-pipeline <command>: <what to do next>` and exits with its code, so no command
formats its own failures. `configuration(args)` is the one way a command reads the
configuration, `--build-dir` included.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from brain_pipeline.config import BrainConfig

COMMANDS = (
    "materialize",
    "chunk",
    "search",
    "eval",
    "fixture",
    "history",
    "bench",
    "status",
    "gc",
    "publications",
    "rollback",
    "ui",
)

DESCRIPTION = """\
Build, evaluate and publish the knowledge store behind the teaching agent.

Typical use:
  brain-pipeline materialize              build everything on the configured corpus
  brain-pipeline search "what is a VPC" --area aws-tutor
  brain-pipeline eval                     retrieval quality on the fixture
  brain-pipeline status                   what is live and whether it is stale
"""


class CommandError(Exception):
    """A command cannot go on: its message says what to do next, one line per problem,
    and `main` prints each after the command's name and exits with `code` (2: unusable
    input or configuration, unless the command's own table says otherwise)."""

    def __init__(self, message: object, code: int = 2) -> None:
        super().__init__(str(message))
        self.code = code


BUILD_DIR_HELP = "build directory (default: config)"


def configuration(args: argparse.Namespace | None = None) -> BrainConfig:
    """The configuration, with the command's `--build-dir` (when it has one and it is
    given) in place of `build_dir`; or a CommandError carrying its problem (exit 2).

    Every command that takes `--build-dir` means the same by it: the configured state
    (`state.ledger`, `state.blobs`: by default inside the build directory) for that
    build directory. Imported here, not at module level: `--help` must not pay for the
    config module.
    """
    from brain_pipeline.config import ConfigError, load_config

    try:
        cfg = load_config()
    except ConfigError as exc:
        raise CommandError(exc) from None
    build_dir = getattr(args, "build_dir", None)
    return cfg.model_copy(update={"build_dir": Path(build_dir)}) if build_dir else cfg


def force_refusal(
    cfg: BrainConfig, force: bool, reason: str | None, *, flag: str, what: str, how: str
) -> str | None:
    """Why a command's force flag (`flag`) and `--reason` may not go on, in one line,
    before any lock or run (the steps ask the gate again, whatever launched them):
    `--reason` alone records nothing, and the gate's own refusal (`publish.allow_force`,
    a reason missing; `how` says where it goes)."""
    from brain_pipeline.publishing.gate import force_refusal as refusal

    if reason is not None and not force:
        return f"--reason goes with {flag} (it is the forced {what}'s record)"
    return refusal(force, reason, allow_force=cfg.publish.allow_force, how=how)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="brain-pipeline",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        module = importlib.import_module(f"brain_pipeline.cli.{name}")
        child = sub.add_parser(
            name,
            help=module.HELP,
            description=getattr(module, "DESCRIPTION", module.HELP),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.add_arguments(child)
        child.set_defaults(_module=module)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from brain_pipeline.utils.terminal import escape_controls

    # Corpus text can hold control characters (a terminal obeys them) and lone surrogates
    # (the store keeps them): print both as escapes, whatever prints them.
    escape_controls(sys.stdout, sys.stderr)
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return 2
    try:
        return int(args._module.run(args))
    except CommandError as exc:
        for line in str(exc).splitlines() or [""]:
            print(f"brain-pipeline {args.command}: {line}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
