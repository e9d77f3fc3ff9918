"""`brain-pipeline ui` picks `dg dev` and falls back to `dagster dev` (command line only;
the browser test in brain_pipeline_tests/ui runs the real server)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import yaml

from brain_pipeline.cli import main
from brain_pipeline.cli.ui import Which, dev_command, exposure_warning

REPO = Path(__file__).resolve().parents[2]


def installed(*programs: str) -> Which:
    """A `shutil.which` that finds only `programs`, in /opt/bin."""
    return lambda name: f"/opt/bin/{name}" if name in programs else None


def test_dg_dev_when_dg_is_installed() -> None:
    command = dev_command(Path("/p/workspace.yaml"), "127.0.0.1", 3001,
                          which=installed("dg", "dagster"))
    assert command == ["/opt/bin/dg", "dev", "-w", "/p/workspace.yaml", "-h", "127.0.0.1",
                       "-p", "3001"]


def test_dagster_dev_when_dg_is_missing() -> None:
    command = dev_command(Path("w.yaml"), "0.0.0.0", 3000, which=installed("dagster"))
    assert command == ["/opt/bin/dagster", "dev", "-w", "w.yaml", "-h", "0.0.0.0", "-p", "3000"]


def test_nothing_when_neither_is_installed() -> None:
    assert dev_command(Path("w.yaml"), "127.0.0.1", 3000, which=installed()) is None


def test_both_ways_name_the_code_location_brain_pipeline() -> None:
    """workspace.yaml (read by dg dev -w and dagster dev -w) and [tool.dg.project] (read by
    a plain `dg dev` in the repository) agree on a readable name."""
    import tomllib

    workspace = yaml.safe_load((REPO / "workspace.yaml").read_text())
    (entry,) = workspace["load_from"]
    assert entry["python_module"]["location_name"] == "brain_pipeline"
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["dg"]["project"]
    assert project["code_location_name"] == "brain_pipeline"
    assert project["code_location_target_module"] == entry["python_module"]["module_name"]
    dependencies = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    assert "dagster-dg-cli==1.13.27" in dependencies


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.20", "[2001:db8::1]", "brain.lan"])
def test_a_reachable_address_is_warned_about(host: str) -> None:
    warning = exposure_warning(host, 3000)
    assert warning is not None and "\n" not in warning
    assert "no authentication" in warning and "reverse proxy" in warning
    assert f"{host}:3000" in warning


@pytest.mark.parametrize("host", ["127.0.0.1", "127.8.0.1", "::1", "[::1]", "localhost"])
def test_loopback_is_quiet(host: str) -> None:
    assert exposure_warning(host, 3000) is None


def test_the_command_warns_on_stderr_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Through `main()`: the warning comes before anything starts (here the port is
    busy, so the command stops right after it, without starting the UI)."""
    config = tmp_path / "corpus_config.yaml"
    config.write_text(f"build_dir: {tmp_path / 'build'}\nembedding:\n  provider: none\n")
    monkeypatch.setenv("BRAIN_CONFIG", str(config))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    with socket.socket() as busy:
        busy.bind(("0.0.0.0", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["ui", "--host", "0.0.0.0", "-p", str(port)]) == 2
    captured = capsys.readouterr()
    (warning,) = [line for line in captured.err.splitlines() if "no authentication" in line]
    assert warning.startswith("brain-pipeline ui: warning: the Dagster UI has no authentication")
    assert f"0.0.0.0:{port}" in warning
    assert "in use" in captured.err
    assert captured.out == ""


def test_docs_show_the_warning_the_command_prints() -> None:
    docs = (REPO / "docs" / "ui.md").read_text(encoding="utf-8")
    assert f"brain-pipeline ui: {exposure_warning('0.0.0.0', 3000)}\n" in docs
    assert "proxy_pass http://127.0.0.1:3000;" in docs and "auth_basic_user_file" in docs
