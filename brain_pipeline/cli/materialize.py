"""`brain-pipeline materialize` (placeholder until its owner fills it in)."""

from __future__ import annotations

import argparse

HELP = "materialize (not implemented yet)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    pass


def run(args: argparse.Namespace) -> int:
    raise SystemExit("brain-pipeline materialize: not implemented yet")
