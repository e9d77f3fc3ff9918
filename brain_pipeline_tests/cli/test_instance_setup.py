"""The start of the commands that use the instance (`materialize`, `ui`): the configuration,
then the instance folder it names."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from brain_pipeline.cli import configuration, main
from brain_pipeline.lib.instance import ensure_instance_home


def _config(tmp_path: Path, extra: str = "") -> Path:
    path = tmp_path / "corpus_config.yaml"
    path.write_text(f"build_dir: {tmp_path / 'build'}\nembedding:\n  provider: none\n{extra}")
    return path


def test_a_usable_configuration_points_dagster_home_at_a_ready_instance(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "instance"
    monkeypatch.setenv("BRAIN_CONFIG", str(_config(tmp_path, f"dagster_home: {home}\n")))
    monkeypatch.setenv("DAGSTER_HOME", "")  # unset for the config, restored after the test
    cfg = configuration()
    assert cfg.build_dir == tmp_path / "build"
    ensure_instance_home(cfg.instance_home())
    assert os.environ["DAGSTER_HOME"] == str(home.resolve())
    settings = yaml.safe_load((home / "dagster.yaml").read_text())
    assert settings["nux"] == {"enabled": False}  # a folder it created: our file in it


def test_dagster_home_from_the_environment_wins_over_the_configuration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chosen = tmp_path / "chosen"
    monkeypatch.setenv("BRAIN_CONFIG", str(_config(tmp_path, f"dagster_home: {tmp_path}/x\n")))
    monkeypatch.setenv("DAGSTER_HOME", str(chosen))
    ensure_instance_home(configuration().instance_home())
    assert (chosen / "dagster.yaml").is_file() and not (tmp_path / "x").exists()


def test_a_configuration_error_is_one_line_naming_the_command_and_creates_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("BRAIN_CONFIG", str(tmp_path / "missing.yaml"))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    assert main(["ui"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("brain-pipeline ui: ") and err.count("\n") == 1
    assert "missing.yaml" in err
    assert not (tmp_path / "home").exists()
