"""An unusable configuration is one line on stderr and exit status 2, for every command.

Checked through `main()` in-process: the commands load the configuration before they
import Dagster, open a store or start the UI, so nothing else runs.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from brain_pipeline.cli import main

COMMANDS = {
    "materialize": ["materialize"],
    "ui": ["ui"],
    "chunk": ["chunk"],
    "eval": ["eval"],
    "search": ["search", "what is a VPC", "--area", "aws"],
}


def _directory(tmp_path: Path) -> Path:
    folder = tmp_path / "conf.d"
    folder.mkdir()
    return folder


def _binary(tmp_path: Path) -> Path:
    path = tmp_path / "config.yaml"
    path.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)))
    return path


def _latin1(tmp_path: Path) -> Path:
    path = tmp_path / "config.yaml"
    path.write_bytes("build_dir: caf\xe9\n".encode("latin-1"))
    return path


def _nul_in_utf8(tmp_path: Path) -> Path:
    path = tmp_path / "config.yaml"
    path.write_bytes(b"build_dir: out\x00\n")
    return path


def _cron(expression: str) -> Callable[[Path], Path]:
    def make(tmp_path: Path) -> Path:
        path = tmp_path / "config.yaml"
        path.write_text(f'schedule:\n  cron: "{expression}"\n', encoding="utf-8")
        return path

    return make


CONFIGS: dict[str, tuple[Callable[[Path], Path], str]] = {
    "a-directory": (_directory, "is a directory"),
    "a-binary-file": (_binary, "is not UTF-8 text"),
    "latin-1-text": (_latin1, "is not UTF-8 text (byte 0xe9"),
    "a-nul-byte": (_nul_in_utf8, "not valid YAML"),
    "cron-out-of-range": (_cron("99 99 * * *"), "schedule.cron: minute 99 is out of range"),
    "cron-never-fires": (_cron("0 3 31 2 *"), "never fires: February has no day 31"),
}


@pytest.mark.parametrize("config", CONFIGS, ids=list(CONFIGS))
@pytest.mark.parametrize("command", COMMANDS, ids=list(COMMANDS))
def test_an_unusable_configuration_is_one_line_and_exit_2(
    command: str,
    config: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    make, expected = CONFIGS[config]
    path = make(tmp_path)
    corpus = tmp_path / "corpus"
    (corpus / "area").mkdir(parents=True)
    monkeypatch.setenv("BRAIN_CONFIG", str(path))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster-home"))
    monkeypatch.chdir(tmp_path)
    argv = [arg.format(corpus=corpus) for arg in COMMANDS[command]]
    assert main(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith(f"brain-pipeline {argv[0]}: ")
    assert expected in lines[0]
    assert "Traceback" not in captured.err and captured.out == ""
    assert not (tmp_path / "dagster-home").exists()  # nothing started


def test_materialize_never_prints_a_secret_held_by_a_bad_key(tmp_path: Path) -> None:
    """The command itself, as a user runs it: a webhook URL under a mistyped key and a
    password given where its variable's name belongs are named, never shown."""
    secret = "SECRETXYZ-9d1f-hooks-token"
    config = tmp_path / "corpus_config.yaml"
    config.write_text(
        "notify:\n"
        f"  webhook: https://hooks.example/services/T0/B0/{secret}\n"
        "  email:\n"
        "    host: smtp.example\n    sender: a@example\n    recipients: [b@example]\n"
        f"    password_env: {{value: {secret}}}\n",
        encoding="utf-8",
    )
    env = {**os.environ, "BRAIN_CONFIG": str(config), "DAGSTER_HOME": str(tmp_path / "home")}
    done = subprocess.run(
        ["brain-pipeline", "materialize"], cwd=tmp_path, env=env,
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "notify.webhook: Extra inputs are not permitted" in line
    assert "notify.email.password_env: Input should be a valid string" in line
    assert "SECRETXYZ" not in done.stdout + done.stderr
