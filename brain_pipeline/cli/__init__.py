"""The `brain-pipeline` command: a thin layer over the core.

Each sub-command lives in its own module `brain_pipeline.cli.<name>` exposing
`HELP: str`, `add_arguments(parser)` and `run(args) -> int`. Those modules import only
argparse at module level and pull in the core (and Dagster, for `materialize`) inside
`run`, so `--help`, `chunk`, `search`, `eval` and `bench` start fast.

A command that cannot go on raises `CommandError`: `main` prints it as the one line
`brain-pipeline <command>: <what to do next>` and exits with its code, so no command
formats its own failures.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
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
    """A command cannot go on: its message is one line saying what to do next, and
    `main` prints it after the command's name and exits with `code` (2: unusable input
    or configuration, unless the command's own table says otherwise)."""

    def __init__(self, message: object, code: int = 2) -> None:
        super().__init__(str(message))
        self.code = code


def configuration() -> BrainConfig:
    """The configuration, or a CommandError carrying its one-line problem (exit 2).

    Imported here, not at module level: `--help` must not pay for the config module.
    """
    from brain_pipeline.config import ConfigError, load_config

    try:
        return load_config()
    except ConfigError as exc:
        raise CommandError(exc) from None


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
        print(f"brain-pipeline {args.command}: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
