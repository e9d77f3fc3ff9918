"""End to end through the Dagster web UI: what a person sees and clicks in `dg dev`.

The server and the browser are real (see conftest.py); the only shortcut is reading
run and check status from the UI's own GraphQL endpoint instead of scraping it.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from brain_pipeline_tests.ui.conftest import DagsterDev

pytestmark = pytest.mark.ui

# The asset graph the issue describes: names a person looks for on the lineage page.
SOURCES = {"corpus", "eval_fixture"}
ASSETS = SOURCES | {
    "knowledge_chunks",
    "knowledge_store",
    "embeddings",
    "published_local",
    "published_s3",
}
LOCATION = "brain_pipeline"  # workspace.yaml's location_name, not the module path
CHECK = "retrieval_eval"
CHECKED_ASSET = "embeddings"
ALL_CHECKS = {
    ("knowledge_chunks", "corpus_problems"),
    ("knowledge_store", "no_empty_area"),
    ("knowledge_store", "fits_agent_string_limit"),
    ("embeddings", "retrieval_eval"),
    ("embeddings", "embedding_coverage"),
    ("embeddings", "embedding_gaps"),
    ("published_local", "published_store_is_current"),
    ("published_local", "vectors_reach_agent"),
}
RUN_TIMEOUT = 120.0
TERMINAL_RUN_STATUSES = {"SUCCESS", "FAILURE", "CANCELED"}

ASSET_KEYS_QUERY = "{ assetNodes { assetKey { path } } }"
RUN_QUERY = """
query Run($runId: ID!) {
  runOrError(runId: $runId) {
    __typename
    ... on Run {
      status
      jobName
      assetSelection { path }
      assetCheckSelection { name assetKey { path } }
    }
  }
}
"""
CHECK_EXECUTIONS_QUERY = """
query Checks($assetKey: AssetKeyInput!, $checkName: String!) {
  assetCheckExecutions(assetKey: $assetKey, checkName: $checkName, limit: 5) {
    runId
    status
    evaluation { success severity description }
  }
}
"""
LATEST_MATERIALIZATION_QUERY = """
query Latest($assetKey: AssetKeyInput!) {
  assetOrError(assetKey: $assetKey) {
    __typename
    ... on Asset { assetMaterializations(limit: 1) { runId } }
  }
}
"""


def open_lineage_with_groups_expanded(page: Any, server: DagsterDev) -> None:
    """The global lineage page, with every group unfolded as a person would do it."""
    page.goto(f"{server.base_url}/asset-groups")
    page.get_by_role("button", name="Materialize all").wait_for()
    # Groups start collapsed; the graph's settings menu (the last gear on the page, the
    # first being the navigation's) unfolds them all.
    page.locator('[aria-label="settings"]').last.click()
    page.get_by_role("menuitem", name="Expand all groups").click()
    page.keyboard.press("Escape")


def launch_from_materialize_all(page: Any, server: DagsterDev) -> str:
    """Click "Materialize all" on the lineage page; return the run id its toast links to."""
    page.goto(f"{server.base_url}/asset-groups")
    button = page.get_by_role("button", name="Materialize all")
    button.wait_for()
    button.click()
    launched = re.compile(r"Launched run ([0-9a-f]{8})")
    toast = page.get_by_text(launched).first
    toast.wait_for()
    prefix = launched.search(toast.inner_text())
    assert prefix, toast.inner_text()
    # The toast's "View" link carries the full id.
    link = page.locator(f'a[href*="/runs/{prefix.group(1)}"]').first
    link.wait_for()
    href = link.get_attribute("href") or ""
    match = re.search(r"/runs/([0-9a-f-]{36})", href)
    assert match, f"the launch toast links to {href!r}, not a run"
    return match.group(1)


CHECK_ABOUT = {
    "retrieval_eval": "Runs the labelled fixture through",
    "corpus_problems": "WARN when files were skipped for a cause",
    "published_store_is_current": "WARN when the agent serves an older corpus",
}


def open_check(page: Any, server: DagsterDev, asset: str, check: str) -> None:
    """The asset's Checks tab with `check` selected in its list, as a person clicks it;
    returns once the detail pane shows that check's description."""
    page.goto(f"{server.base_url}/assets/{asset}?view=checks")
    page.get_by_text(check, exact=True).first.click()
    page.get_by_text(re.compile(re.escape(CHECK_ABOUT[check]))).first.wait_for(state="visible")


def wait_for_run(server: DagsterDev, run_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + RUN_TIMEOUT
    while time.monotonic() < deadline:
        server.assert_running()
        run: dict[str, Any] = server.graphql(RUN_QUERY, {"runId": run_id})["runOrError"]
        assert run["__typename"] == "Run", run
        if run["status"] in TERMINAL_RUN_STATUSES:
            return run
        time.sleep(0.5)
    pytest.fail(f"run {run_id} did not finish in {RUN_TIMEOUT:.0f} s:\n{server.log_tail()}")


def test_lineage_page_shows_every_asset_and_the_check(
    page: Any, dagster_dev: DagsterDev, artifacts_dir: Path
) -> None:
    served = {
        "/".join(node["assetKey"]["path"])
        for node in dagster_dev.graphql(ASSET_KEYS_QUERY)["assetNodes"]
    }
    assert served == ASSETS, "the code location serves another asset graph than the issue's"

    open_lineage_with_groups_expanded(page, dagster_dev)
    try:
        for name in sorted(ASSETS):  # a missing one times out naming itself
            page.get_by_text(name, exact=True).first.wait_for(state="visible", timeout=15_000)
    finally:
        page.screenshot(path=str(artifacts_dir / "lineage.png"))

    open_check(page, dagster_dev, CHECKED_ASSET, CHECK)
    try:
        page.get_by_text("blocking", exact=True).first.wait_for(state="visible")
    finally:
        page.screenshot(path=str(artifacts_dir / "embeddings-checks-before-run.png"))


def test_the_ui_runs_under_dg_with_a_readable_location_name(
    page: Any, dagster_dev: DagsterDev, artifacts_dir: Path
) -> None:
    from brain_pipeline_tests.ui.conftest import LOCATIONS_QUERY

    # `brain-pipeline ui` exec'd itself into `dg dev` (dg is a pinned dependency).
    argv = Path(f"/proc/{dagster_dev.process.pid}/cmdline").read_bytes().split(b"\0")
    assert any(Path(a.decode()).name == "dg" for a in argv[:2]) and b"dev" in argv, argv

    entries = dagster_dev.graphql(LOCATIONS_QUERY)["workspaceOrError"]["locationEntries"]
    assert [entry["name"] for entry in entries] == [LOCATION]

    page.goto(f"{dagster_dev.base_url}/deployment/locations")
    try:
        # The name is the row's link; the module path only appears as its detail line.
        page.get_by_text(LOCATION, exact=True).first.wait_for(state="visible")
        links = {
            (a.inner_text().strip(), a.get_attribute("href") or "")
            for a in page.locator("a").all()
        }
        named = [text for text, href in links if href.rstrip("/") == f"/locations/{LOCATION}"]
        assert named and set(named[0].split()) == {LOCATION}, links
        assert not any("brain_pipeline.defs" in text + href for text, href in links), links
    finally:
        page.screenshot(path=str(artifacts_dir / "code-locations.png"))
    assert "superseded" not in dagster_dev.log_path.read_text(encoding="utf-8", errors="replace")


def test_materialize_all_from_the_ui_publishes_the_evaluated_store(
    page: Any, dagster_dev: DagsterDev, artifacts_dir: Path
) -> None:
    started = time.monotonic()
    run_id = launch_from_materialize_all(page, dagster_dev)
    run = wait_for_run(dagster_dev, run_id)
    dagster_dev.timings["ui_run_s"] = time.monotonic() - started
    page.goto(f"{dagster_dev.base_url}/runs/{run_id}")
    page.get_by_text(re.compile(r"^(Success|Failure|Canceled)$")).first.wait_for()
    page.screenshot(path=str(artifacts_dir / "run.png"))
    assert run["status"] == "SUCCESS", f"run {run_id} ended {run['status']}:\n" + (
        dagster_dev.log_tail()
    )

    # What the button launched: every asset, and the blocking check with them.
    assert {"/".join(key["path"]) for key in run["assetSelection"]} == ASSETS - SOURCES
    assert {
        ("/".join(check["assetKey"]["path"]), check["name"]) for check in run["assetCheckSelection"]
    } == ALL_CHECKS

    executions = dagster_dev.graphql(
        CHECK_EXECUTIONS_QUERY,
        {"assetKey": {"path": [CHECKED_ASSET]}, "checkName": CHECK},
    )["assetCheckExecutions"]
    in_run = [e for e in executions if e["runId"] == run_id]
    assert len(in_run) == 1, executions
    assert in_run[0]["status"] == "SUCCEEDED"
    assert in_run[0]["evaluation"]["success"] is True

    built = dagster_dev.build_dir / "knowledge-store.json"
    published = dagster_dev.publish_root / "src" / "storage" / "knowledge-store.json"
    assert built.is_file(), f"{built} missing after the run"
    assert published.is_file(), f"{published} missing after the run"
    assert published.read_bytes() == built.read_bytes()
    from brain_pipeline.corpus.store import parse_store

    assert parse_store(published.read_bytes()), "the published store has no chunks"

    # And the person looking at the asset sees the check passed.
    open_check(page, dagster_dev, CHECKED_ASSET, CHECK)
    try:
        page.get_by_text("Passed", exact=True).first.wait_for(state="visible")
    finally:
        page.screenshot(path=str(artifacts_dir / "embeddings-checks.png"))


def check_in_run(server: DagsterDev, asset: str, name: str, run_id: str) -> dict[str, Any]:
    executions = server.graphql(
        CHECK_EXECUTIONS_QUERY, {"assetKey": {"path": [asset]}, "checkName": name}
    )["assetCheckExecutions"]
    in_run = [e for e in executions if e["runId"] == run_id]
    assert len(in_run) == 1, (asset, name, executions)
    execution: dict[str, Any] = in_run[0]
    return execution


def test_warnings_freshness_and_the_skipped_s3_publish_as_a_person_sees_them(
    page: Any, dagster_dev: DagsterDev, artifacts_dir: Path
) -> None:
    run_id = launch_from_materialize_all(page, dagster_dev)
    assert wait_for_run(dagster_dev, run_id)["status"] == "SUCCESS", dagster_dev.log_tail()

    # The sample corpus holds a malformed roadmap: a WARN check, the run still succeeds.
    problems = check_in_run(dagster_dev, "knowledge_chunks", "corpus_problems", run_id)
    assert problems["evaluation"]["success"] is False
    assert problems["evaluation"]["severity"] == "WARN"
    open_check(page, dagster_dev, "knowledge_chunks", "corpus_problems")
    try:
        page.get_by_text(re.compile(r"file\(s\) need a look")).first.wait_for(state="visible")
    finally:
        page.screenshot(path=str(artifacts_dir / "warn-check.png"))

    # Freshness: the store just published serves the latest observed corpus.
    fresh = check_in_run(dagster_dev, "published_local", "published_store_is_current", run_id)
    assert fresh["evaluation"]["success"] is True
    open_check(page, dagster_dev, "published_local", "published_store_is_current")
    try:
        page.get_by_text(re.compile(r"current: the latest corpus")).first.wait_for(
            state="visible"
        )
    finally:
        page.screenshot(path=str(artifacts_dir / "freshness.png"))

    # No bucket configured: published_s3 ran but recorded no materialisation.
    latest = dagster_dev.graphql(
        LATEST_MATERIALIZATION_QUERY, {"assetKey": {"path": ["published_s3"]}}
    )["assetOrError"]
    assert latest["__typename"] != "Asset" or latest["assetMaterializations"] == []
    page.goto(f"{dagster_dev.base_url}/assets/published_s3")
    try:
        page.get_by_text(re.compile(r"[Nn]ever materialized")).first.wait_for(state="visible")
    finally:
        page.screenshot(path=str(artifacts_dir / "s3-skipped.png"))


def test_a_stale_label_blocks_publishing_and_the_check_says_why(
    page: Any, dagster_dev: DagsterDev, artifacts_dir: Path
) -> None:
    original = dagster_dev.fixture.read_text(encoding="utf-8")
    data = json.loads(original)
    query = data["queries"][0]
    query["relevant"] = [*query["relevant"], "0badc0ffee00"]
    dagster_dev.fixture.write_text(json.dumps(data, indent=2), encoding="utf-8")
    try:
        run_id = launch_from_materialize_all(page, dagster_dev)
        assert wait_for_run(dagster_dev, run_id)["status"] == "FAILURE"
    finally:
        dagster_dev.fixture.write_text(original, encoding="utf-8")
    failed = check_in_run(dagster_dev, CHECKED_ASSET, CHECK, run_id)
    assert failed["evaluation"]["success"] is False
    description = failed["evaluation"]["description"]
    assert "stale fixture" in description and "0badc0ffee00" in description
    assert query["query"] in description  # the query that holds the label is named
    open_check(page, dagster_dev, CHECKED_ASSET, CHECK)
    try:
        page.get_by_text(re.compile(r"stale fixture")).first.wait_for(state="visible")
    finally:
        page.screenshot(path=str(artifacts_dir / "stale-label-check.png"))


LAUNCH_MUTATION = """
mutation Launch($executionParams: ExecutionParams!) {
  launchPipelineExecution(executionParams: $executionParams) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on PythonError { message }
    ... on RunConfigValidationInvalid { errors { message } }
  }
}
"""
RUN_LOGS_QUERY = """
query Logs($runId: ID!) {
  logsForRun(runId: $runId) {
    __typename
    ... on EventConnection {
      events {
        __typename
        ... on MessageEvent { message }
        ... on ExecutionStepFailureEvent { error { message } }
      }
    }
  }
}
"""


def _publish_root_bytes(server: DagsterDev) -> dict[str, bytes]:
    """Every file under the publish root but the run lock a publishing run creates."""
    root = server.publish_root
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() and p.name != ".brain-publish.lock"
    }


def test_force_from_the_launchpad_without_a_reason_publishes_nothing(
    dagster_dev: DagsterDev,
) -> None:
    """What anyone who reaches the UI can send: `published_local` launched through the
    web server's own GraphQL with `{"force": true}` and no reason. The step refuses in
    one line and the publish root stays byte-identical."""
    before = _publish_root_bytes(dagster_dev)
    launched = dagster_dev.graphql(
        LAUNCH_MUTATION,
        {
            "executionParams": {
                "selector": {
                    "repositoryLocationName": LOCATION,
                    "repositoryName": "__repository__",
                    "pipelineName": "__ASSET_JOB",
                    "assetSelection": [{"path": ["published_local"]}],
                },
                "runConfigData": {"ops": {"published_local": {"config": {"force": True}}}},
                "mode": "default",
            }
        },
    )["launchPipelineExecution"]
    assert launched["__typename"] == "LaunchRunSuccess", launched
    run_id = launched["run"]["runId"]
    assert wait_for_run(dagster_dev, run_id)["status"] == "FAILURE"
    logs = dagster_dev.graphql(RUN_LOGS_QUERY, {"runId": run_id})["logsForRun"]
    said = " ".join(
        str(event.get("message") or "") + str((event.get("error") or {}).get("message") or "")
        for event in logs["events"]
    )
    assert "publishing refused: force needs a reason" in said, said[-2000:]
    assert _publish_root_bytes(dagster_dev) == before
