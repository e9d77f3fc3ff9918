"""A run made without Dagster (`steps.direct_run`) does what a Dagster run of the same
graph does: the same artifacts, records and publication, the same blocking semantics.

Each parity test builds one tiny corpus twice, in two build directories: once through
a real in-process Dagster run (`lib.runner.materialize_selection`, what `--select '*'`
runs) and once through `run_plan`, and compares what is on disk.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import dagster as dg

from brain_pipeline.config import load_config
from brain_pipeline.embedding.factory import embedder_for
from brain_pipeline.state.layout import StateLayout
from brain_pipeline.state.records import read_record
from brain_pipeline.steps.direct_run import _RUNNERS, RunContext, run_plan
from brain_pipeline.steps.plan import ASSETS, PLAN
from brain_pipeline.steps.publish import upload_to_s3
from brain_pipeline.steps.run_journal import RunJournal, StepEntry
from brain_pipeline.steps.run_summary import journal_lines
from brain_pipeline.steps.trigger import BY_HAND, TRIGGERED_BY
from brain_pipeline_tests.defs.conftest import (
    IMPOSSIBLE,
    Project,
    edit_corpus,
    make_project,
    make_tiny_project,
    tiny_fixture,
    write_tiny_corpus,
)


class Lines:
    """A step log that keeps what it is told (the CLI prints it instead)."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def for_step(self, step: str) -> Lines:
        self.step = step
        return self

    def info(self, msg: str) -> None:
        self.lines.append(f"{self.step}: {msg}")

    def warning(self, msg: str) -> None:
        self.lines.append(f"{self.step}: warning: {msg}")


def _direct(project: Project, **overrides: Any) -> RunJournal:
    cfg = load_config(str(project.config_path))
    log = Lines()
    settings: dict[str, Any] = {
        "cfg": cfg,
        "run_id": str(uuid.uuid4()),
        "log_for": log.for_step,
        "make_embedder": embedder_for,
        "upload": upload_to_s3,
        **overrides,
    }
    return run_plan(RunContext(**settings))


def _step(journal: RunJournal, name: str) -> StepEntry:
    entry = journal.step(name)
    assert entry is not None, name
    return entry


def _twin_projects(tmp_path: Path) -> tuple[Project, Project]:
    """Two projects over one corpus and fixture: `dagster/` and `direct/`."""
    corpus = tmp_path / "corpus"
    fixture = tiny_fixture(write_tiny_corpus(corpus))
    twins = []
    for name in ("dagster", "direct"):
        (tmp_path / name).mkdir()
        twins.append(make_project(tmp_path / name, corpus, fixture))
    return twins[0], twins[1]


def _records(project: Project) -> dict[str, str]:
    layout = StateLayout.of(project.build)
    out = {}
    for asset in ASSETS:
        record = read_record(layout, asset)
        if record is not None:
            out[asset] = record.data_version
    return out


def test_every_node_of_the_plan_has_its_function() -> None:
    assert set(_RUNNERS) == {node.name for node in PLAN}


def test_a_direct_run_builds_and_publishes_what_a_dagster_run_does(tmp_path: Path) -> None:
    dagster, direct = _twin_projects(tmp_path)
    assert dagster.materialize("*").success
    journal = _direct(direct)
    assert journal.succeeded, journal_lines(journal, lexical=True)
    assert direct.store_file.read_bytes() == dagster.store_file.read_bytes()
    published = direct.published() / "knowledge-store.json"
    assert published.read_bytes() == (dagster.published() / "knowledge-store.json").read_bytes()
    assert _records(direct) == _records(dagster)
    assert set(_records(direct)) == {"knowledge_chunks", "knowledge_store", "embeddings",
                                     "published_local"}
    manifests = [
        json.loads((p.published() / "manifest.json").read_bytes()) for p in (dagster, direct)
    ]
    assert manifests[0]["corpus_digest"] == manifests[1]["corpus_digest"]
    assert [e.name for e in journal.steps] == [n.name for n in PLAN]
    assert _step(journal, "published_s3").status == "nothing"  # no bucket configured
    # Why the run exists, as the Dagster run's chunks say it (a person, by hand).
    event = dagster.instance.get_latest_materialization_event(dg.AssetKey("knowledge_chunks"))
    assert event is not None and event.asset_materialization is not None
    said = event.asset_materialization.metadata[TRIGGERED_BY].value
    assert _step(journal, "knowledge_chunks").metadata[TRIGGERED_BY] == said == BY_HAND


def test_an_edit_is_picked_up_incrementally_as_in_a_dagster_run(tmp_path: Path) -> None:
    dagster, direct = _twin_projects(tmp_path)
    assert dagster.materialize("*").success
    assert _direct(direct).succeeded
    edit_corpus(dagster)  # the twins share the corpus: one edit for both
    assert dagster.materialize("*").success
    journal = _direct(direct)
    assert journal.succeeded
    chunks = _step(journal, "knowledge_chunks")
    assert chunks is not None and chunks.metadata["files_chunked"] == 1
    assert direct.store_file.read_bytes() == dagster.store_file.read_bytes()
    assert _records(direct) == _records(dagster)
    assert _step(journal, "published_local").metadata["status"] == "updated"


def test_a_failed_blocking_check_blocks_publishing_but_not_the_other_checks(
    tmp_path: Path,
) -> None:
    dagster, direct = _twin_projects(tmp_path)
    for project in (dagster, direct):
        project.write_config(**IMPOSSIBLE)
    outcome = dagster.materialize("*", lexical=True)
    journal = _direct(direct)
    assert not outcome.success and not journal.succeeded
    evaluation = _step(journal, "retrieval_eval")
    assert evaluation is not None
    assert (evaluation.status, evaluation.passed, evaluation.severity) == ("ok", False, "ERROR")
    assert {_step(journal, n).status for n in ("published_local", "published_s3")} == {"blocked"}
    assert _step(journal, "embedding_coverage").status == "ok"  # a sibling check still runs
    assert not (direct.published() / "knowledge-store.json").exists()
    # The same lines as the Dagster run's summary (its order follows Dagster's events).
    assert set(journal_lines(journal, lexical=True)) >= {
        line for line in outcome.lines if "blocked" in line or "FAILED" in line
    }


def test_a_step_that_raises_fails_the_run_and_blocks_what_is_downstream(
    tmp_path: Path,
) -> None:
    project = make_tiny_project(tmp_path)

    def broken(cfg: Any) -> Any:
        raise ConnectionError("the embedding service is unreachable") from OSError("refused")

    journal = _direct(project, make_embedder=broken)
    assert not journal.succeeded
    failed = _step(journal, "embeddings")
    assert failed is not None and failed.status == "failed"
    assert failed.error == (
        "ConnectionError: the embedding service is unreachable (caused by OSError: refused)"
    )
    downstream = ("retrieval_eval", "embedding_coverage", "published_local", "published_s3")
    assert {_step(journal, n).status for n in downstream} == {"blocked"}
    assert _step(journal, "knowledge_store").status == "ok"
    assert project.store_file.exists()  # what finished before the failure stays


def test_ctrl_c_ends_the_run_and_keeps_what_finished(tmp_path: Path) -> None:
    project = make_tiny_project(tmp_path)

    def interrupted(cfg: Any) -> Any:
        raise KeyboardInterrupt

    journal = _direct(project, make_embedder=interrupted)
    assert journal.interrupted == "interrupted" and not journal.succeeded
    assert [e.name for e in journal.steps][-1] == "fits_agent_string_limit"  # before embeddings
    assert project.store_file.exists()
    assert not (project.published() / "knowledge-store.json").exists()


def test_the_currency_check_compares_with_this_runs_observation(tmp_path: Path) -> None:
    project = make_tiny_project(tmp_path)
    journal = _direct(project)
    current = _step(journal, "published_store_is_current")
    assert current is not None and current.passed is True
    observed = _step(journal, "corpus")
    assert observed is not None
    digests = current.metadata["digests"].rows
    assert ["observed", observed.data_version] in digests


def test_a_direct_run_after_a_dagster_run_changes_nothing(tmp_path: Path) -> None:
    """Builds are interchangeable: a direct run over a Dagster run's build directory
    finds every asset current and the publication live."""
    project = make_tiny_project(tmp_path)
    assert project.materialize("*").success
    before = project.store_file.read_bytes()
    journal = _direct(project)
    assert journal.succeeded
    assert _step(journal, "knowledge_chunks").metadata["files_chunked"] == 0
    assert _step(journal, "published_local").metadata["status"] == "unchanged"
    assert project.store_file.read_bytes() == before


def test_a_direct_run_uploads_to_s3_what_it_published(tmp_path: Path, s3: object) -> None:
    import boto3

    project = make_tiny_project(tmp_path)
    client = boto3.client("s3")
    client.create_bucket(Bucket="direct-store")
    project.write_config(**{"publish.s3": {"bucket": "direct-store", "prefix": "kb"}})
    journal = _direct(project)
    assert journal.succeeded, journal_lines(journal, lexical=True)
    assert _step(journal, "published_s3").status == "ok"
    body = client.get_object(Bucket="direct-store", Key="kb/knowledge-store.json")["Body"]
    assert body.read() == project.store_file.read_bytes()
    remote = json.loads(client.get_object(Bucket="direct-store", Key="kb/manifest.json")["Body"]
                        .read())
    assert remote["run_id"] == journal.run_id


def test_an_s3_failure_fails_the_run_and_keeps_the_local_publish(
    tmp_path: Path, s3: object
) -> None:
    project = make_tiny_project(tmp_path)
    project.write_config(**{"publish.s3": {"bucket": "no-such-bucket"}})
    journal = _direct(project)
    assert not journal.succeeded
    failed = _step(journal, "published_s3")
    assert failed.status == "failed" and "no-such-bucket" in (failed.error or "")
    published = project.published() / "knowledge-store.json"
    assert published.read_bytes() == project.store_file.read_bytes()
