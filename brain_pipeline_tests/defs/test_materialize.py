"""The asset graph, materialised in-process: ingest, evaluation gate, publishing."""

from __future__ import annotations

import json
from pathlib import Path

import boto3
import dagster as dg
import pytest

from brain_pipeline.cli import main
from brain_pipeline.corpus.file_chunks import ingest_corpus
from brain_pipeline.corpus.observation import corpus_digest
from brain_pipeline.corpus.store import parse_store
from brain_pipeline_tests.defs.conftest import (
    TINY_PARAGRAPHS,
    Project,
    make_project,
    tiny_fixture,
    write_tiny_corpus,
)

CHECK_KEY = dg.AssetCheckKey(dg.AssetKey("embeddings"), "retrieval_eval")


def _asset_metadata(project: Project, name: str) -> dict[str, object]:
    event = project.instance.get_latest_materialization_event(dg.AssetKey(name))
    assert event is not None and event.asset_materialization is not None
    return {k: getattr(v, "value", v) for k, v in event.asset_materialization.metadata.items()}


def _observation_metadata(project: Project, name: str) -> dict[str, object]:
    records = project.instance.fetch_observations(dg.AssetKey(name), limit=1).records
    assert records, f"{name} was never observed"
    observation = records[0].asset_observation
    assert observation is not None
    return {k: getattr(v, "value", v) for k, v in observation.metadata.items()}


def test_ingest_group_on_the_sample_corpus(sample_project: Project) -> None:
    outcome = sample_project.materialize("group:ingest")
    assert outcome.success, outcome.lines
    stored = parse_store(sample_project.store_file.read_bytes())
    areas = {c.area for c in stored}
    assert areas == {
        "aws-tutor",
        "cellular-automata",
        "english-certification-instructor",
        "job-techinical-interview",
    }
    assert len(stored) >= 400
    assert len({c.id for c in stored}) == len(stored)
    # Nothing under a raw/ folder, and the malformed roadmap is reported.
    assert not any("/raw/" in c.source for c in stored)
    observed = _observation_metadata(sample_project, "corpus")
    assert int(str(observed["text_files"])) + int(str(observed["roadmap_files"])) >= 40
    chunks_meta = _asset_metadata(sample_project, "knowledge_chunks")
    assert "formatted-broken-draft.json" in str(chunks_meta["problems"])
    store_meta = _asset_metadata(sample_project, "knowledge_store")
    assert store_meta["chunks"] == len(stored)
    # Chunking keeps every occurrence; the store collapses the repeated paragraph.
    collapsed = store_meta["duplicates_collapsed"]
    assert isinstance(collapsed, int) and collapsed >= 1
    assert chunks_meta["occurrences"] == len(stored) + collapsed


def test_graph_publishes_what_passed(tiny_project: Project) -> None:
    (tiny_project.publish_root / "dist").mkdir(parents=True)
    outcome = tiny_project.materialize()
    assert outcome.success, outcome.lines
    build_bytes = tiny_project.store_file.read_bytes()
    for kind in ("src", "dist"):
        target = tiny_project.published(kind)
        assert (target / "knowledge-store.json").read_bytes() == build_bytes
        manifest = json.loads((target / "manifest.json").read_text())
        assert manifest["chunk_count"] == len(parse_store(build_bytes))
        # The digest of the corpus the store was built from, as status recomputes it.
        assert manifest["corpus_digest"] == corpus_digest(tiny_project.corpus)
        assert not (target / "embeddings.bin").exists()  # provider none: no vectors
    record = tiny_project.instance.get_latest_asset_check_evaluation_record(CHECK_KEY)
    assert record is not None and record.status.value == "SUCCEEDED"
    # No bucket: the S3 step does nothing and records no materialisation.
    assert tiny_project.instance.get_latest_materialization_event(
        dg.AssetKey("published_s3")
    ) is None


def test_rerun_with_nothing_changed_reports_unchanged(tiny_project: Project) -> None:
    assert tiny_project.materialize().success
    store_mtime = tiny_project.store_file.stat().st_mtime_ns
    published = tiny_project.published() / "knowledge-store.json"
    published_mtime = published.stat().st_mtime_ns
    assert tiny_project.materialize().success
    assert _asset_metadata(tiny_project, "knowledge_store")["status"] == "unchanged"
    assert _asset_metadata(tiny_project, "published_local")["status"] == "unchanged"
    assert tiny_project.store_file.stat().st_mtime_ns == store_mtime
    assert published.stat().st_mtime_ns == published_mtime


def _assert_nothing_published(project: Project, bucket: str | None = None) -> None:
    for kind in ("src", "dist"):
        assert not (project.published(kind) / "knowledge-store.json").exists()
    if bucket is not None:
        listing = boto3.client("s3").list_objects_v2(Bucket=bucket)
        assert listing.get("KeyCount", 0) == 0


def test_impossible_threshold_blocks_every_publish(tiny_project: Project, s3: object) -> None:
    boto3.client("s3").create_bucket(Bucket="gated")
    (tiny_project.publish_root / "dist").mkdir(parents=True)
    tiny_project.write_config(
        **{
            "evaluation.thresholds": {"bm25": {"min_ndcg_at_10": 1.0, "min_recall_at_10": 1.0}},
            "publish.s3": {"bucket": "gated"},
        }
    )
    outcome = tiny_project.materialize()
    assert not outcome.success
    assert any("retrieval_eval: FAILED" in line for line in outcome.lines)
    assert any(line.startswith("  blocked  published_local") for line in outcome.lines)
    _assert_nothing_published(tiny_project, bucket="gated")


def _with_bucket_and_dist(project: Project, bucket: str) -> None:
    boto3.client("s3").create_bucket(Bucket=bucket)
    (project.publish_root / "dist").mkdir(parents=True)
    project.write_config(**{"publish.s3": {"bucket": bucket}})


def test_stale_fixture_blocks_publishing(tmp_path: Path, s3: object) -> None:
    corpus = tmp_path / "corpus"
    ids = write_tiny_corpus(corpus)
    fixture = tiny_fixture(ids)
    fixture["queries"][0]["relevant"].append("0123456789ab")
    project = make_project(tmp_path, corpus, fixture)
    _with_bucket_and_dist(project, "stale-gate")
    outcome = project.materialize()
    assert not outcome.success
    failure = " ".join(outcome.failed_checks)
    assert "stale" in failure and "0123456789ab" in failure
    assert "stateful firewall security groups" in failure  # the query that holds the label
    metadata = _check_metadata(project)
    rows = metadata["per_query"].records  # type: ignore[attr-defined]
    flagged = {row.data["query"] for row in rows if row.data["stale_label"]}
    assert flagged == {"stateful firewall security groups"}
    _assert_nothing_published(project, bucket="stale-gate")


def _check_metadata(project: Project) -> dict[str, object]:
    record = project.instance.get_latest_asset_check_evaluation_record(CHECK_KEY)
    assert record is not None and record.event is not None and record.event.dagster_event
    evaluation = record.event.dagster_event.event_specific_data
    return dict(getattr(evaluation, "metadata", {}))


def test_the_check_records_bounds_margins_and_reuses_unchanged_results(
    tiny_project: Project,
) -> None:
    assert tiny_project.materialize().success
    first = _check_metadata(tiny_project)
    value = first["bm25.ndcg_at_10"].value  # type: ignore[attr-defined]
    floor = first["bm25.ndcg_at_10.min"].value  # type: ignore[attr-defined]
    margin = first["bm25.ndcg_at_10.margin"].value  # type: ignore[attr-defined]
    assert floor == 0.2 and abs(margin - (value - floor)) < 1e-4
    assert first["reused"].value is False  # type: ignore[attr-defined]
    assert tiny_project.materialize().success
    second = _check_metadata(tiny_project)
    assert second["reused"].value is True  # type: ignore[attr-defined]
    assert second["bm25.ndcg_at_10"].value == value  # type: ignore[attr-defined]
    # A changed fixture is a changed input: the evaluation runs again.
    fixture = Path(str(tiny_project.settings["evaluation"]["fixture"]))
    fixture.write_text(fixture.read_text().replace("unchanging shapes", "still shapes"))
    assert tiny_project.materialize().success
    assert _check_metadata(tiny_project)["reused"].value is False  # type: ignore[attr-defined]


def test_empty_store_blocks_publishing(tmp_path: Path, s3: object) -> None:
    corpus = tmp_path / "corpus"
    (corpus / "alpha").mkdir(parents=True)
    (corpus / "alpha" / "short.md").write_text("too short\n\nalso short\n")
    ids = {p: "000000000000" for ps in TINY_PARAGRAPHS.values() for p in ps}
    project = make_project(tmp_path, corpus, tiny_fixture(ids))
    _with_bucket_and_dist(project, "empty-gate")
    outcome = project.materialize()
    assert not outcome.success
    assert parse_store(project.store_file.read_bytes()) == []
    assert "empty" in " ".join(outcome.failed_checks)
    _assert_nothing_published(project, bucket="empty-gate")


def test_publish_alone_refuses_after_a_failed_evaluation_unless_forced(
    tiny_project: Project, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    tiny_project.write_config(**{"evaluation.thresholds": {"bm25": {"min_ndcg_at_10": 1.0}}})
    assert not tiny_project.materialize().success
    alone = tiny_project.materialize("published_local")
    assert not alone.success
    assert any("publishing refused" in line for line in alone.lines)
    _assert_nothing_published(tiny_project)
    forced = tiny_project.materialize(
        "published_local", force_publish=True, force_reason="the demo needs it"
    )
    assert forced.success, forced.lines
    # The gate's decision is logged once, with the failure it overrode.
    logged = [
        entry.user_message
        for entry in tiny_project.instance.all_logs(forced.run_id)
        if "FORCED PUBLISH" in (entry.user_message or "")
    ]
    assert len(logged) == 1 and "min" in logged[0], logged
    # `status` shows the verdict the live store went out on, and that it was forced.
    monkeypatch.setenv("BRAIN_CONFIG", str(tiny_project.config_path))
    assert main(["status", "--json"]) in (0, 2)
    shown = json.loads(capsys.readouterr().out)["verdict"]
    assert shown["severity"] == "ERROR" and shown["forced"]
    assert shown["decision"].startswith("FORCED PUBLISH") and "nDCG@10" in shown["headline"]
    published = tiny_project.published() / "knowledge-store.json"
    assert published.read_bytes() == tiny_project.store_file.read_bytes()


def test_publish_alone_refuses_data_that_was_not_the_data_evaluated(
    tiny_project: Project,
) -> None:
    assert tiny_project.materialize().success
    # The corpus changes and the store is rebuilt, but the check is not run again.
    (tiny_project.corpus / "alpha" / "extra.md").write_text(
        "A brand new paragraph that nobody has evaluated yet.\n"
    )
    assert tiny_project.materialize("group:ingest").success
    alone = tiny_project.materialize("published_local")
    assert not alone.success
    published = tiny_project.published() / "knowledge-store.json"
    assert published.read_bytes() != tiny_project.store_file.read_bytes()


def test_s3_bucket_holds_a_byte_identical_store(tiny_project: Project, s3: object) -> None:
    client = boto3.client("s3")
    client.create_bucket(Bucket="agent-store")
    tiny_project.write_config(**{"publish.s3": {"bucket": "agent-store", "prefix": "kb"}})
    outcome = tiny_project.materialize()
    assert outcome.success, outcome.lines
    body = client.get_object(Bucket="agent-store", Key="kb/knowledge-store.json")
    assert body["ContentType"] == "application/json"
    assert body["Body"].read() == tiny_project.store_file.read_bytes()


def test_s3_carries_the_manifest_that_is_live_locally(tiny_project: Project, s3: object) -> None:
    first = tiny_project.materialize()  # no bucket yet: local publish only
    assert first.success, first.lines
    client = boto3.client("s3")
    client.create_bucket(Bucket="later")
    tiny_project.write_config(**{"publish.s3": {"bucket": "later"}})
    second = tiny_project.materialize("published_s3")
    assert second.success, second.lines
    remote = json.loads(client.get_object(Bucket="later", Key="manifest.json")["Body"].read())
    local = json.loads((tiny_project.published() / "manifest.json").read_text())
    # Same publication: made by the first run, describing the same bytes. Only the note
    # on vectors may differ, as S3 gets none by default.
    assert remote["run_id"] == local["run_id"] == first.run_id
    for key in ("published_at", "store", "corpus_digest", "evaluation"):
        assert remote[key] == local[key], key


def test_s3_failure_fails_the_asset_and_keeps_the_local_publish(
    tiny_project: Project, s3: object
) -> None:
    tiny_project.write_config(**{"publish.s3": {"bucket": "no-such-bucket"}})
    outcome = tiny_project.materialize()
    assert not outcome.success
    assert any(
        "FAILED   published_s3" in line and "no-such-bucket" in line for line in outcome.lines
    )
    published = tiny_project.published() / "knowledge-store.json"
    assert published.read_bytes() == tiny_project.store_file.read_bytes()


def test_store_asset_matches_the_cli_ingest(tiny_project: Project) -> None:
    assert tiny_project.materialize("group:ingest").success
    assert tiny_project.store_file.read_bytes() == ingest_corpus(tiny_project.corpus).store_bytes()


def test_cli_materialize_exits_non_zero_when_the_check_fails(
    sample_project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from brain_pipeline.cli import main

    sample_project.write_config(**{"evaluation.thresholds": {"bm25": {"min_ndcg_at_10": 1.0}}})
    monkeypatch.setenv("BRAIN_CONFIG", str(sample_project.config_path))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster-home"))
    assert main(["materialize"]) == 1
    _assert_nothing_published(sample_project)
    assert main(["materialize", "--select", "*"]) == 1  # the same with a selection
    _assert_nothing_published(sample_project)
    # The CLI used the shared, persistent instance: the failed check is on record there.
    instance = dg.DagsterInstance.get()
    try:
        record = instance.get_latest_asset_check_evaluation_record(CHECK_KEY)
        assert record is not None and record.status.value == "FAILED"
    finally:
        instance.dispose()


def test_a_bad_selection_is_refused_with_the_asset_names(tiny_project: Project) -> None:
    from brain_pipeline.lib.runner import SelectionError

    with pytest.raises(SelectionError) as err:
        tiny_project.materialize("no_such_asset")
    assert "knowledge_store" in str(err.value) and "published_local" in str(err.value)


def test_manifest_records_the_corpus_the_store_was_built_from(tiny_project: Project) -> None:
    assert tiny_project.materialize().success
    built_from = corpus_digest(tiny_project.corpus)
    (tiny_project.corpus / "alpha" / "later.md").write_text(
        "Written after the build, so the live store does not contain it yet.\n"
    )
    # Re-publishing the same (evaluated) store must not claim the newer corpus.
    assert tiny_project.materialize("published_local").success
    manifest = json.loads((tiny_project.published() / "manifest.json").read_text())
    assert manifest["corpus_digest"] == built_from != corpus_digest(tiny_project.corpus)


def test_a_stale_label_is_named_with_its_query_and_its_old_file(tiny_project: Project) -> None:
    assert tiny_project.materialize().success
    notes = tiny_project.corpus / "alpha" / "notes.md"
    notes.write_text(notes.read_text().replace("stateful firewalls", "stateful  firewalls!"))
    outcome = tiny_project.materialize()
    assert not outcome.success
    failure = " ".join(outcome.failed_checks)
    assert "query 'stateful firewall security groups'" in failure
    assert "was in alpha/notes.md" in failure
    metadata = _check_metadata(tiny_project)
    assert metadata["auto_repairable"].value == 1  # type: ignore[attr-defined]
    assert "fixture repair --write" in str(metadata["repair_command"].value)  # type: ignore[attr-defined]
