"""A real `dg dev` (via `brain-pipeline ui`) on a free loopback port and a headless Chromium.

Both are module-scoped: starting the web UI costs 10-20 s on a 2-core machine, so the
tests of this folder share one server (its own temporary instance, build and publish
folders) and one browser page.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from brain_pipeline.lib.instance import INSTANCE_YAML
from brain_pipeline_tests.conftest import LEAKY_ENV

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts" / "ui"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
SERVER_START_TIMEOUT = 90.0
STOP_GRACE_SECONDS = 10.0


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "ui: drives the Dagster web UI in headless Chromium (deselect: -m 'not ui')"
    )


class GraphQLError(RuntimeError):
    """The web server answered a GraphQL request with errors."""


@dataclass
class DagsterDev:
    """One running `dagster dev`: where it listens and the folders it writes to."""

    process: subprocess.Popen[bytes]
    base_url: str
    home: Path
    build_dir: Path
    publish_root: Path
    log_path: Path
    fixture: Path
    timings: dict[str, float] = field(default_factory=dict)

    def graphql(self, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
        """POST one query to the UI's own GraphQL endpoint; return its `data`."""
        body = json.dumps({"query": query, "variables": variables or {}}).encode()
        request = urllib.request.Request(
            f"{self.base_url}/graphql",
            data=body,
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            payload = json.loads(response.read())
        if payload.get("errors"):
            raise GraphQLError(json.dumps(payload["errors"])[:2000])
        data: dict[str, Any] = payload["data"]
        return data

    def log_tail(self, lines: int = 40) -> str:
        """The end of the server's output, for failure messages."""
        text = self.log_path.read_text(encoding="utf-8", errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def assert_running(self) -> None:
        if self.process.poll() is not None:
            pytest.fail(f"dagster dev exited with {self.process.returncode}:\n{self.log_tail()}")


def free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def server_environment(
    home: Path, build_dir: Path, publish_root: Path, fixture: Path
) -> dict[str, str]:
    """The parent's environment minus anything pointing at real services, plus our folders.

    Built explicitly because the root conftest's clean-up is function-scoped and this
    server is shared by the module.
    """
    env = {k: v for k, v in os.environ.items() if k not in LEAKY_ENV}
    env.update(
        DAGSTER_HOME=str(home),
        BRAIN_BUILD_DIR=str(build_dir),
        BRAIN_PUBLISH_ROOT=str(publish_root),
        BRAIN_EMBEDDING_PROVIDER="none",
        BRAIN_EVAL_FIXTURE=str(fixture),
        PYTHONUNBUFFERED="1",
    )
    return env


def wait_for_server_info(server: DagsterDev, deadline: float) -> None:
    while time.monotonic() < deadline:
        server.assert_running()
        try:
            with urllib.request.urlopen(f"{server.base_url}/server_info", timeout=5) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.5)
    pytest.fail(f"dagster dev did not answer /server_info in time:\n{server.log_tail()}")


LOCATIONS_QUERY = """
{
  workspaceOrError {
    __typename
    ... on Workspace {
      locationEntries {
        name
        loadStatus
        locationOrLoadError {
          __typename
          ... on RepositoryLocation { repositories { name } }
          ... on PythonError { message }
        }
      }
    }
    ... on PythonError { message }
  }
}
"""


def wait_for_code_location(server: DagsterDev, deadline: float) -> None:
    """Until every code location is LOADED with a repository; fail at once on a load error.

    Transport hiccups right after start-up are retried until the deadline.
    """
    last_error = ""
    while time.monotonic() < deadline:
        server.assert_running()
        try:
            workspace = server.graphql(LOCATIONS_QUERY)["workspaceOrError"]
        except (urllib.error.URLError, ConnectionError, TimeoutError, GraphQLError) as error:
            last_error = repr(error)
            time.sleep(0.5)
            continue
        if workspace["__typename"] != "Workspace":
            pytest.fail(f"workspace failed to load: {workspace.get('message')}")
        entries = workspace["locationEntries"]
        for entry in entries:
            location = entry["locationOrLoadError"] or {}
            if location.get("__typename") == "PythonError":
                pytest.fail(f"code location {entry['name']} failed: {location['message']}")
        loaded = [
            e
            for e in entries
            if e["loadStatus"] == "LOADED" and (e["locationOrLoadError"] or {}).get("repositories")
        ]
        if entries and len(loaded) == len(entries):
            return
        time.sleep(0.5)
    pytest.fail(
        f"the code location did not load in time ({last_error or 'no error'}):\n{server.log_tail()}"
    )


def process_group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def stop_process_group(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM the group we started, SIGKILL it if anything is left after the grace time."""
    pgid = process.pid  # start_new_session: the leader's pid is the group id
    if not process_group_alive(pgid):
        process.wait()
        return
    os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_SECONDS
    while process_group_alive(pgid) and time.monotonic() < deadline:
        process.poll()  # reap the leader: a zombie would still count as a member
        time.sleep(0.2)
    if process_group_alive(pgid):
        os.killpg(pgid, signal.SIGKILL)
    process.wait(timeout=STOP_GRACE_SECONDS)


@pytest.fixture(scope="module")
def artifacts_dir() -> Path:
    """Screenshots and the server log land here (gitignored), for CI to keep."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


@pytest.fixture(scope="module")
def dagster_dev(
    tmp_path_factory: pytest.TempPathFactory, artifacts_dir: Path
) -> Iterator[DagsterDev]:
    """`brain-pipeline ui` (= `dg dev -w workspace.yaml`) in its own process group."""
    root = tmp_path_factory.mktemp("dagster_ui")
    home = root / "dagster_home"
    home.mkdir()
    # The same settings `ensure_instance_home` writes: no first-visit dialog, no telemetry.
    (home / "dagster.yaml").write_text(INSTANCE_YAML, encoding="utf-8")
    build_dir, publish_root = root / "build", root / "agent"
    # A copy of the sample fixture, so a test can make a label stale as a person would.
    fixture = root / "retrieval-eval.json"
    shutil.copyfile(REPO / "examples" / "retrieval-eval.json", fixture)
    log_path = root / "dagster-dev.log"
    port = free_loopback_port()
    # The README's command: it sets DAGSTER_HOME-aware instance use, restores SIGINT and
    # SIGTERM (see brain_pipeline.cli.ui) and becomes `dg dev -w workspace.yaml`.
    command = [
        sys.executable,
        "-m",
        "brain_pipeline.cli",
        "ui",
        "--host",
        "127.0.0.1",
        "-p",
        str(port),
    ]
    started = time.monotonic()
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command,
            cwd=REPO,
            env=server_environment(home, build_dir, publish_root, fixture),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = DagsterDev(
        process=process,
        base_url=f"http://127.0.0.1:{port}",
        home=home,
        build_dir=build_dir,
        publish_root=publish_root,
        log_path=log_path,
        fixture=fixture,
    )
    try:
        deadline = started + SERVER_START_TIMEOUT
        wait_for_server_info(server, deadline)
        server.timings["server_info_s"] = time.monotonic() - started
        wait_for_code_location(server, deadline)
        server.timings["code_location_loaded_s"] = time.monotonic() - started
        yield server
    finally:
        stopping = time.monotonic()
        stop_process_group(process)
        server.timings["shutdown_s"] = time.monotonic() - stopping
        shutil.copyfile(log_path, artifacts_dir / "dagster-dev.log")
        timings = json.dumps({k: round(v, 2) for k, v in server.timings.items()})
        (artifacts_dir / "timings.json").write_text(timings + "\n", encoding="utf-8")
        print(f"dagster dev timings (seconds): {timings}")


@pytest.fixture(scope="module")
def page() -> Iterator[Any]:
    """A Playwright page in the Debian Chromium (Playwright's own browsers are not used).

    Independent of the server, so a missing browser fails before a server is started.
    """
    if not CHROMIUM.exists():
        pytest.fail(
            f"{CHROMIUM} not found: install the Debian package "
            "(apt-get install -y --no-install-recommends chromium); the UI test needs it"
        )
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("Python package playwright missing: pip install -e '.[dev]'")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport={"width": 1600, "height": 1000})
            context.set_default_timeout(30_000)
            yield context.new_page()
        finally:
            browser.close()
