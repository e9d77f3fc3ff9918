"""`brain-pipeline ui` picks `dg dev` and falls back to `dagster dev` (command line only;
the browser test in brain_pipeline_tests/ui runs the real server)."""

from __future__ import annotations

from pathlib import Path

import yaml

from brain_pipeline.cli.ui import Which, dev_command

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
