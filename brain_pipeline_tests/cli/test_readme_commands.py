"""The command line page's synopsis (docs/cli.md, its first block) is what the parser accepts.

Every command listed there exists, every command that exists is listed, and every flag
a line shows is one its `--help` offers (for `fixture`, per sub-command). A renamed or
dropped flag fails here instead of in a user's terminal.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from brain_pipeline.cli import COMMANDS, main

REPO = Path(__file__).resolve().parents[2]


def _usage_lines() -> list[str]:
    text = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    section = text.split("# The command line", 1)[1]
    block = section.split("```", 2)[1]
    return [
        re.split(r"\s{2,}", line.strip())[0]
        for line in block.splitlines()
        if line.startswith("brain-pipeline ")
    ]


def _usages() -> list[tuple[list[str], list[str]]]:
    """(command words, flags) per usage; `fixture a | b | c` gives one per sub-command."""
    found = []
    for line in _usage_lines():
        words = line.split()
        command = words[1]
        rest = line.split(command, 1)[1]
        parts = rest.split(" | ") if command == "fixture" else [rest]
        for part in parts:
            sub = [part.split()[0]] if command == "fixture" else []
            flags = re.findall(r"(?<![\w-])(--?[a-z][a-z0-9-]*)", part)
            found.append(([command, *sub], flags))
    return found


USAGES = _usages()


def test_every_command_is_listed_and_every_listed_command_exists() -> None:
    assert {words[0] for words, _ in USAGES} == set(COMMANDS)


@pytest.mark.parametrize(
    ("words", "flags"), USAGES, ids=[" ".join(words) for words, _ in USAGES]
)
def test_each_listed_flag_is_accepted(
    words: list[str], flags: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stop:
        main([*words, "--help"])
    assert stop.value.code == 0
    help_text = capsys.readouterr().out
    missing = [flag for flag in flags if not re.search(rf"(?<![\w-]){flag}\b", help_text)]
    assert missing == [], help_text
