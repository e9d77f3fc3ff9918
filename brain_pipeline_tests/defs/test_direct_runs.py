"""`direct_runs` on a real instance: journals in, what the instance then holds out.

Each tick is evaluated the way the code server does (`evaluate_tick`), its result goes
through Dagster's serialisation (what crosses to the daemon), and each asset event is
stored with `report_runless_asset_event`, the call the sensor daemon makes for a
result's `asset_events`. Running the real daemon (as lib/test_conditions.py does) would
add a minute per test and check nothing more of ours.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import yaml
from dagster._utils.test.data_versions import get_stale_status_resolver

from brain_pipeline.definitions import build_definitions
from brain_pipeline.defs.direct_runs import JOURNALS_PER_TICK, SENSOR_NAME
from brain_pipeline.lib.conditions import consumed_corpus_version
from brain_pipeline.lib.steps import BUILD_DIR_KEY, latest_corpus_observation
from brain_pipeline.state.layout import StateLayout
from brain_pipeline.steps.plan import PLAN
from brain_pipeline.steps.report import Markdown, RunLink, Table
from brain_pipeline.steps.run_journal import RunJournal, StepEntry, write_journal

RUN_A = "aaaaaaaa-0000-4000-8000-000000000001"
RUN_B = "bbbbbbbb-0000-4000-8000-000000000002"
RUN_C = "cccccccc-0000-4000-8000-000000000003"


class Location:
    """A configuration, its build directory, its definitions and a real instance."""

    def __init__(self, root: Path, instance: dg.DagsterInstance) -> None:
        self.root = root
        self.build = root / "build"
        root.mkdir(parents=True, exist_ok=True)
        self.config_path = root / "corpus_config.yaml"
        settings = {
            "corpus": {"path": str(root / "corpus"), "candidates": []},
            "build_dir": str(self.build),
            "embedding": {"provider": "none"},
            "publish": {"root": str(root / "agent")},
            "schedule": {"sensor_enabled": False},  # direct_runs is on regardless
        }
        self.config_path.write_text(yaml.safe_dump(settings), encoding="utf-8")
        self.defs = build_definitions(str(self.config_path))
        self.instance = instance
        self.layout = StateLayout.of(self.build)

    def code_version(self, name: str) -> str:
        version = self.defs.resolve_asset_graph().get(dg.AssetKey(name)).code_version
        assert version is not None
        return version

    def tick(self, cursor: str | None) -> Any:
        """One evaluation, stored as the daemon stores it; returns the tick's data."""
        sensor = self.defs.resolve_sensor_def(SENSOR_NAME)
        context = dg.build_sensor_context(
            instance=self.instance, cursor=cursor, definitions=self.defs
        )
        data: Any = dg.deserialize_value(dg.serialize_value(sensor.evaluate_tick(context)))
        for event in data.asset_events:
            self.instance.report_runless_asset_event(event)
        return data

    def materialization(self, name: str) -> Any:
        """The latest materialisation of `name` (None when it has none)."""
        entry = self.instance.get_latest_materialization_event(dg.AssetKey(name))
        return entry.asset_materialization if entry is not None else None

    def check(self, asset: str, name: str) -> Any:
        key = dg.AssetCheckKey(dg.AssetKey(asset), name)
        records = self.instance.event_log_storage.get_asset_check_execution_history(key, 1)
        entry: Any = records[0].event if records else None
        return entry.dagster_event.event_specific_data if entry is not None else None


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.instance_for_test() as made:
        yield made


@pytest.fixture
def location(tmp_path: Path, instance: dg.DagsterInstance) -> Location:
    return Location(tmp_path / "a", instance)


def full_journal(
    location: Location,
    run_id: str,
    finished: str,
    *,
    failed: str | None = None,
    code_versions: dict[str, str] | None = None,
    eval_passed: bool = True,
) -> RunJournal:
    """A run of the whole plan: every node ok, except `failed` (then what is downstream
    of it is blocked, as a direct run records it)."""
    versions = code_versions or {}
    down: set[str] = set()
    steps = []
    for node in PLAN:
        if failed is not None and (node.name == failed or down & set(node.deps)):
            down.add(node.name)
            entry = StepEntry(node.name, node.kind, "blocked", asset=node.asset)
            if node.name == failed:
                entry.status, entry.error = "failed", "boom"
            steps.append(entry)
            continue
        if node.kind == "check":
            passed = eval_passed if node.name == "retrieval_eval" else True
            steps.append(
                StepEntry(
                    node.name, "check", "ok", asset=node.asset, blocking=node.blocking,
                    passed=passed, severity="ERROR" if not passed else "WARN",
                    description=f"{node.name} of {run_id[:8]}",
                    metadata={"headline": f"{node.name} said so", "ndcg_at_10": 0.75},
                )
            )  # fmt: skip
            continue
        metadata: dict[str, Any] = {"chunks": 42, "note": f"{node.name} in {run_id[:8]}"}
        if node.name == "knowledge_chunks":
            metadata["corpus_digest"] = f"corpus-{run_id[:8]}"
        if node.name == "knowledge_store":
            metadata["areas"] = Table([("area", "string"), ("chunks", "int")], [["alpha", 2]])
            metadata["summary"] = Markdown("**two** areas")
            metadata["evaluated_in_run"] = RunLink(run_id)
        code = None
        if node.kind == "asset":
            code = versions.get(node.name, location.code_version(node.name))
        steps.append(
            StepEntry(
                node.name, node.kind, "ok", data_version=f"{node.name}-{run_id[:8]}",
                code_version=code, metadata=metadata,
            )
        )  # fmt: skip
    return RunJournal(
        run_id=run_id,
        started_at=finished,
        finished_at=finished,
        launched_by="brain-pipeline materialize",
        trigger="a person",
        succeeded=failed is None and eval_passed,
        steps=steps,
    )


def observation_journal(run_id: str, finished: str) -> RunJournal:
    """A run that got no further than observing the corpus (one event)."""
    step = StepEntry("corpus", "observation", "ok", data_version=f"corpus-{run_id[-4:]}")
    return RunJournal(run_id, finished, finished, "brain-pipeline materialize", "a person",
                      False, [step])  # fmt: skip


def test_a_journal_becomes_the_instances_materialisations_observations_and_checks(
    location: Location,
) -> None:
    path = write_journal(location.layout, full_journal(location, RUN_A, "2026-12-02T09:00:00"))
    data = location.tick(None)
    assert data.cursor == path.name

    store = location.materialization("knowledge_store")
    assert store is not None
    assert store.tags["dagster/data_version"] == f"knowledge_store-{RUN_A[:8]}"
    assert store.tags["dagster/code_version"] == location.code_version("knowledge_store")
    metadata = store.metadata
    assert metadata["chunks"] == dg.IntMetadataValue(42)
    assert metadata["note"].value == f"knowledge_store in {RUN_A[:8]}"
    assert metadata["direct_run"] == dg.TextMetadataValue(RUN_A)
    assert metadata["launched_by"].value == "brain-pipeline materialize"
    assert metadata["finished_at"].value == "2026-12-02T09:00:00"
    areas = metadata["areas"]
    assert isinstance(areas, dg.TableMetadataValue)
    assert [dict(record.data) for record in areas.records] == [{"area": "alpha", "chunks": 2}]
    assert metadata["summary"] == dg.MarkdownMetadataValue("**two** areas")
    # The direct run is no Dagster run: its link is text, not a dead link.
    assert metadata["evaluated_in_run"] == dg.TextMetadataValue(RUN_A)

    digest, _ = latest_corpus_observation(location.instance)
    assert digest == f"corpus-{RUN_A[:8]}"
    # Automation's corpus_version_unconsumed reads both: the direct run consumed it.
    assert consumed_corpus_version(location.instance) == digest

    evaluation = location.check("embeddings", "retrieval_eval")
    assert evaluation is not None
    assert (evaluation.passed, evaluation.severity) == (True, dg.AssetCheckSeverity.WARN)
    assert evaluation.blocking is True
    assert evaluation.description == f"retrieval_eval of {RUN_A[:8]}"
    assert evaluation.metadata["direct_run"] == dg.TextMetadataValue(RUN_A)
    assert evaluation.metadata["ndcg_at_10"] == dg.FloatMetadataValue(0.75)


def test_a_failed_check_is_stored_failed_with_its_severity(location: Location) -> None:
    journal = full_journal(location, RUN_A, "2026-12-02T09:00:00", eval_passed=False)
    write_journal(location.layout, journal)
    location.tick(None)
    evaluation = location.check("embeddings", "retrieval_eval")
    assert (evaluation.passed, evaluation.severity) == (False, dg.AssetCheckSeverity.ERROR)


def test_a_failed_asset_and_what_it_blocked_record_no_materialisation(
    location: Location,
) -> None:
    write_journal(location.layout, full_journal(location, RUN_A, "2026-12-02T09:00:00"))
    cursor = location.tick(None).cursor
    failed = full_journal(location, RUN_B, "2026-12-02T09:05:00", failed="embeddings")
    write_journal(location.layout, failed)
    data = location.tick(cursor)
    assert "failed (embeddings failed: boom; 7 blocked)" in data.skip_message
    assert location.materialization("knowledge_store").metadata["direct_run"].value == RUN_B
    # embeddings and published_local still show RUN_A's: RUN_B materialised neither.
    assert location.materialization("embeddings").metadata["direct_run"].value == RUN_A
    assert location.materialization("published_local").metadata["direct_run"].value == RUN_A
    assert location.check("embeddings", "retrieval_eval").metadata["direct_run"].value == RUN_A


def test_the_reported_assets_are_as_fresh_as_after_a_dagster_run(location: Location) -> None:
    """The provenance tags are read by Dagster's staleness: current code -> FRESH."""
    write_journal(location.layout, full_journal(location, RUN_A, "2026-12-02T09:00:00"))
    location.tick(None)
    assets = list(location.defs.assets or [])
    resolver = get_stale_status_resolver(location.instance, assets)  # type: ignore[arg-type]
    names = [n.name for n in PLAN if n.kind == "asset"]
    assert {name: resolver.get_status(dg.AssetKey(name)).value for name in names} == {
        name: "FRESH" for name in names
    }


def test_a_journal_made_by_other_code_shows_stale_for_its_code_version(
    location: Location,
) -> None:
    older = {"knowledge_store": "store-v0"}
    journal = full_journal(location, RUN_A, "2026-12-02T09:00:00", code_versions=older)
    write_journal(location.layout, journal)
    location.tick(None)
    assets = list(location.defs.assets or [])
    resolver = get_stale_status_resolver(location.instance, assets)  # type: ignore[arg-type]
    causes = resolver.get_stale_causes(dg.AssetKey("knowledge_store"))
    assert [cause.reason for cause in causes] == ["has a new code version"]
    assert resolver.get_status(dg.AssetKey("knowledge_chunks")).value == "FRESH"


def test_the_cursor_advances_and_a_second_tick_reports_nothing(location: Location) -> None:
    first = write_journal(location.layout, observation_journal(RUN_A, "2026-12-02T09:00:00"))
    second = write_journal(location.layout, observation_journal(RUN_B, "2026-12-02T09:01:00"))
    data = location.tick(None)
    assert data.cursor == second.name
    assert len(data.asset_events) == 2
    again = location.tick(data.cursor)
    assert again.asset_events == []
    assert "no new direct run" in again.skip_message
    observations = location.instance.fetch_observations(dg.AssetKey("corpus"), limit=10)
    assert len(observations.records) == 2  # stored once each, in the order the runs ended
    assert first.name < second.name


def test_a_damaged_journal_is_set_aside_and_the_next_one_is_still_reported(
    location: Location,
) -> None:
    first = write_journal(location.layout, observation_journal(RUN_A, "2026-12-02T09:00:00"))
    torn = location.layout.run_journal_dir / ("20261202T090030000000Z-" + RUN_B + ".json")
    torn.write_bytes(b'{"run_id": "bbbb')
    third = write_journal(location.layout, observation_journal(RUN_C, "2026-12-02T09:01:00"))
    assert first.name < torn.name < third.name
    data = location.tick(None)
    assert data.cursor == third.name
    reported = [event.metadata["direct_run"].value for event in data.asset_events]
    assert reported == [RUN_A, RUN_C]
    assert not torn.exists()
    assert torn.with_name(torn.name + ".damaged").read_bytes() == b'{"run_id": "bbbb'


def test_at_most_a_bounded_number_of_journals_per_tick(location: Location) -> None:
    names = [
        write_journal(
            location.layout,
            observation_journal(f"dddddddd-0000-4000-8000-{i:012d}", f"2026-12-02T09:{i:02d}:00"),
        ).name
        for i in range(JOURNALS_PER_TICK + 1)
    ]
    first = location.tick(None)
    assert len(first.asset_events) == JOURNALS_PER_TICK
    assert first.cursor == names[JOURNALS_PER_TICK - 1]
    rest = location.tick(first.cursor)
    assert [e.metadata["direct_run"].value for e in rest.asset_events] == [names[-1][23:59]]
    assert rest.cursor == names[-1]


def test_journals_of_another_build_directory_are_not_read(
    tmp_path: Path, location: Location, instance: dg.DagsterInstance
) -> None:
    other = Location(tmp_path / "b", instance)
    write_journal(other.layout, observation_journal(RUN_B, "2026-12-02T09:00:00"))
    data = location.tick(None)
    assert data.asset_events == []
    assert data.cursor is None
    assert latest_corpus_observation(instance) == (None, None)


def test_an_instance_serving_another_build_directory_is_told_nothing(
    tmp_path: Path, location: Location
) -> None:
    location.instance.run_storage.set_cursor_values({BUILD_DIR_KEY: str(tmp_path / "elsewhere")})
    write_journal(location.layout, observation_journal(RUN_A, "2026-12-02T09:00:00"))
    data = location.tick(None)
    assert data.asset_events == []
    assert data.cursor is None  # reported once the instance serves this directory again
    assert "serves the build directory" in data.skip_message


def test_the_sensor_runs_by_default_and_launches_nothing(location: Location) -> None:
    sensor = location.defs.resolve_sensor_def(SENSOR_NAME)
    assert sensor.default_status == dg.DefaultSensorStatus.RUNNING
    assert sensor.minimum_interval_seconds == 30
    write_journal(location.layout, full_journal(location, RUN_A, "2026-12-02T09:00:00"))
    assert not location.tick(None).run_requests


def test_a_real_direct_run_is_reported_as_it_built_and_reads_fresh(
    tmp_path: Path, instance: dg.DagsterInstance
) -> None:
    """End to end: the journal `run_plan` itself writes (not a hand-made one) becomes
    materialisations carrying the data versions in the build's records, and every
    asset reads FRESH, as after a Dagster run of the same code."""
    import uuid

    from brain_pipeline.config import load_config
    from brain_pipeline.embedding.factory import embedder_for
    from brain_pipeline.state.records import read_record
    from brain_pipeline.steps.direct_run import RunContext, run_plan
    from brain_pipeline.steps.publish import upload_to_s3
    from brain_pipeline_tests.defs.conftest import make_tiny_project

    class Quiet:
        def info(self, msg: str) -> None: ...

        def warning(self, msg: str) -> None: ...

    project = make_tiny_project(tmp_path)
    cfg = load_config(str(project.config_path))
    journal = run_plan(
        RunContext(
            cfg=cfg, run_id=str(uuid.uuid4()), log_for=lambda _: Quiet(),
            make_embedder=embedder_for, upload=upload_to_s3,
        )
    )  # fmt: skip
    assert journal.succeeded
    layout = StateLayout.of(project.build)
    write_journal(layout, journal)
    defs = build_definitions(str(project.config_path))
    context = dg.build_sensor_context(instance=instance, cursor=None, definitions=defs)
    data: Any = dg.deserialize_value(
        dg.serialize_value(defs.resolve_sensor_def(SENSOR_NAME).evaluate_tick(context))
    )
    for event in data.asset_events:
        instance.report_runless_asset_event(event)
    built = ("knowledge_chunks", "knowledge_store", "embeddings", "published_local")
    for name in built:
        entry = instance.get_latest_materialization_event(dg.AssetKey(name))
        record = read_record(layout, name)
        materialization: Any = entry.asset_materialization if entry is not None else None
        assert materialization is not None and record is not None, name
        assert materialization.tags["dagster/data_version"] == record.data_version
    assert instance.get_latest_materialization_event(dg.AssetKey("published_s3")) is None
    resolver = get_stale_status_resolver(instance, list(defs.assets or []))  # type: ignore[arg-type]
    assert {name: resolver.get_status(dg.AssetKey(name)).value for name in built} == {
        name: "FRESH" for name in built
    }
