"""The publish steps called with plain values (no Dagster): each reads the verdict the
evaluation stored for exactly the build's inputs and publishes, or refuses, as it says.

The S3 step uploads to moto's standalone server over real HTTP with real boto3.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import boto3
import pytest

from brain_pipeline.corpus.store import STORE_FILENAME
from brain_pipeline.evaluation.service import evaluate_store_dir, judgement_memory
from brain_pipeline.evaluation.verdict import EvaluationVerdict
from brain_pipeline.publishing.local import storage_dirs
from brain_pipeline.steps.contract import StepFailure
from brain_pipeline.steps.health import fits_agent_string_limit, record_blocking_verdict
from brain_pipeline.steps.ingest import assemble_knowledge_store, chunk_corpus, observe
from brain_pipeline.steps.publish import publish_to_agent, publish_to_s3, upload_to_s3
from brain_pipeline_tests.peers.moto_s3 import TEST_REGION, MotoS3Server
from brain_pipeline_tests.steps.built import build, configure, plant_verdict, write_fixture
from brain_pipeline_tests.steps.conftest import Project, StepLog
from brain_pipeline_tests.steps.handed import build_of, chunks_of

PLANTED_WARNING = "planted warning: 'paragraph chunk store' (aws) became a miss"
PLANTED_FAILURE = "planted failure: bm25 nDCG@10 0.100 < minimum 0.900"


def _evaluated(project: Project, log: StepLog, *, miss: bool = False, **sections: Any) -> Project:
    """Built, and evaluated once by the one evaluation code path (its verdict recorded)."""
    project = configure(project, **sections)
    build(project, log)
    write_fixture(project, miss=miss)
    evaluate_store_dir(project.cfg, project.cfg.build_dir, run_id="eval-run")
    return project


def _live_store(project: Project) -> Path:
    return storage_dirs(project.cfg.publish_root())[0] / STORE_FILENAME


def _forced_lines(log: StepLog) -> list[str]:
    return [line for line in log.infos + log.warnings if "FORCED PUBLISH" in line]


def test_a_passing_verdict_publishes_the_build(project: Project, log: StepLog) -> None:
    project = _evaluated(project, log, evaluation={"thresholds": {"bm25": {"max_misses": 0}}})

    result = publish_to_agent(project.cfg, build_of(project.cfg), force=False, run_id="p", log=log)

    assert _live_store(project).read_bytes() == project.layout.store_file.read_bytes()
    assert result.metadata["status"] == "updated"
    assert result.metadata["decision"] == (
        "every blocking check passed on this data (retrieval_eval, fits_agent_string_limit)"
    )
    assert result.metadata["verdict"].startswith("retrieval evaluation passed: bm25 misses 0")
    assert _forced_lines(log) == []


def test_a_warn_verdict_publishes_with_the_warning_in_the_reason(
    project: Project, log: StepLog
) -> None:
    project = _evaluated(project, log)
    plant_verdict(project, EvaluationVerdict(severity="WARN", warnings=(PLANTED_WARNING,)))

    result = publish_to_agent(project.cfg, build_of(project.cfg), force=False, run_id="p", log=log)

    assert _live_store(project).read_bytes() == project.layout.store_file.read_bytes()
    assert result.metadata["decision"] == (
        "every blocking check passed on this data (retrieval_eval, fits_agent_string_limit) "
        f"with warnings: {PLANTED_WARNING}"
    )
    assert _forced_lines(log) == []


def test_an_error_verdict_blocks_and_publishes_nothing(project: Project, log: StepLog) -> None:
    project = _evaluated(
        project, log, miss=True, evaluation={"thresholds": {"bm25": {"max_misses": 0}}}
    )

    with pytest.raises(StepFailure) as refused:
        publish_to_agent(project.cfg, build_of(project.cfg), force=False, run_id="p", log=log)

    assert str(refused.value).startswith("publishing refused: refusing to publish: ")
    assert "bm25: 1 misses > maximum 0" in str(refused.value)
    assert "(set force to override)" in str(refused.value)
    assert not _live_store(project).exists()


def test_the_stored_verdict_decides_even_when_the_thresholds_disagree(
    project: Project, log: StepLog
) -> None:
    """Nothing re-judged: a stored ERROR on a build every bound passes is refused, and a
    stored PASS on a build a bound fails is published."""
    project = _evaluated(project, log, evaluation={"thresholds": {"bm25": {"max_misses": 0}}})
    plant_verdict(project, EvaluationVerdict(severity="ERROR", failures=(PLANTED_FAILURE,)))
    with pytest.raises(StepFailure, match="planted failure: bm25 nDCG@10"):
        publish_to_agent(project.cfg, build_of(project.cfg), force=False, run_id="p", log=log)
    assert not _live_store(project).exists()

    write_fixture(project, miss=True)  # now the bound fails: 1 miss > 0
    assert evaluate_store_dir(project.cfg, project.cfg.build_dir).verdict.severity == "ERROR"
    plant_verdict(project, EvaluationVerdict(severity="PASS"))
    result = publish_to_agent(project.cfg, build_of(project.cfg), force=False, run_id="p", log=log)
    assert _live_store(project).read_bytes() == project.layout.store_file.read_bytes()
    assert result.metadata["decision"] == (
        "every blocking check passed on this data (retrieval_eval, fits_agent_string_limit)"
    )


def test_force_publishes_a_failed_build_and_says_forced_publish_once(
    project: Project, log: StepLog
) -> None:
    project = _evaluated(
        project, log, miss=True, evaluation={"thresholds": {"bm25": {"max_misses": 0}}}
    )

    result = publish_to_agent(
        project.cfg, build_of(project.cfg), force=True, run_id="p", log=log, reason="demo at nine"
    )

    assert _live_store(project).read_bytes() == project.layout.store_file.read_bytes()
    assert result.metadata["decision"].startswith(
        "FORCED PUBLISH: retrieval_eval failed on this data: bm25: 1 misses > maximum 0"
    )
    assert _forced_lines(log) == [result.metadata["decision"]]


def test_an_empty_store_is_never_published_even_forced_on_a_passing_verdict(
    project: Project, log: StepLog
) -> None:
    project = _evaluated(project, log)
    for path in (project.root / "corpus").rglob("*.md"):
        path.unlink()
    build(project, log)  # the store now holds 0 chunks
    evaluate_store_dir(project.cfg, project.cfg.build_dir)
    plant_verdict(project, EvaluationVerdict(severity="PASS"))

    for force in (False, True):
        with pytest.raises(StepFailure, match=r"refusing to publish an empty store \(0 chunks\)"):
            publish_to_agent(
                project.cfg, build_of(project.cfg), force=force, run_id="p", log=log, reason="r"
            )
    assert not _live_store(project).exists()
    assert _forced_lines(log) == []


@pytest.mark.parametrize("missing", ["no evaluation record", "a record without a verdict"])
def test_a_build_without_a_stored_verdict_is_refused(
    project: Project, log: StepLog, missing: str
) -> None:
    if missing == "no evaluation record":
        project = configure(project)
        build(project, log)
        write_fixture(project)
    else:
        project = _evaluated(project, log)
        plant_verdict(project, None)

    with pytest.raises(StepFailure) as refused:
        publish_to_agent(project.cfg, build_of(project.cfg), force=False, run_id="p", log=log)

    assert str(refused.value) == (
        "publishing refused: refusing to publish: retrieval_eval has not run on this data "
        "(run `brain-pipeline materialize`, whose run checks the build before it publishes) "
        "(set force to override)"
    )
    assert not _live_store(project).exists()


# --- every blocking check, on the bytes to publish ----------------------------------------

TOO_SMALL = {"agent_string_limit": 100}
"""An agent whose loader reads 100 UTF-16 units: every store of the project is too long."""


def test_a_store_over_the_agents_limit_is_refused_though_the_evaluation_passed(
    project: Project, log: StepLog
) -> None:
    project = _evaluated(project, log, publish=TOO_SMALL)
    assert evaluate_store_dir(project.cfg, project.cfg.build_dir).verdict.severity == "PASS"

    for publish in (publish_to_agent, _publish_s3_unconfigured):
        with pytest.raises(StepFailure) as refused:
            publish(project.cfg, build_of(project.cfg), force=False, run_id="p", log=log)
        reason = str(refused.value)
        assert reason.startswith(
            "publishing refused: refusing to publish: fits_agent_string_limit failed on "
            "this data: knowledge-store.json is "
        ), reason
        assert "the agent cannot load it" in reason and "\n" not in reason
    assert not _live_store(project).exists()


def _publish_s3_unconfigured(cfg: Any, build: Any, **kwargs: Any) -> Any:
    """`publish_to_s3` with a bucket named (its gate runs before any upload)."""
    s3 = cfg.publish.s3.model_copy(update={"bucket": "never-reached"})
    cfg = cfg.model_copy(update={"publish": cfg.publish.model_copy(update={"s3": s3})})
    return publish_to_s3(cfg, build, upload=_no_upload, **kwargs)


def _no_upload(*_args: Any) -> Any:
    raise AssertionError("the gate let a refused build reach S3")


def test_a_store_its_blocking_check_never_judged_is_refused(project: Project, log: StepLog) -> None:
    """Rebuilt without its step's checks (as no run of the pipeline does): the verdict
    on record is for the previous bytes, so it is not a pass for these."""
    project = _evaluated(project, log)
    project.write("aws/later.md", "# Later\n\nA paragraph that no check has judged yet.\n")
    chunk_corpus(project.cfg, observe(project.cfg), run_id="r2", log=log)
    assemble_knowledge_store(project.cfg, chunks_of(project.cfg), run_id="r2", log=log)
    write_fixture(project)
    evaluate_store_dir(project.cfg, project.cfg.build_dir, run_id="eval-2")

    never_judged = r"fits_agent_string_limit has not run on this data \(run `brain-pipeline mat"
    with pytest.raises(StepFailure, match=never_judged):
        publish_to_agent(project.cfg, build_of(project.cfg), force=False, run_id="p", log=log)
    assert not _live_store(project).exists()


def test_a_live_store_is_not_reported_unchanged_once_a_lower_limit_fails_it(
    project: Project, log: StepLog
) -> None:
    """The judged key holds the limit: a PASS under the old limit is not one under the new."""
    project = _evaluated(project, log)
    publish_to_agent(project.cfg, build_of(project.cfg), force=False, run_id="p", log=log)
    project = configure(project, publish=TOO_SMALL)

    with pytest.raises(StepFailure, match="fits_agent_string_limit has not run on this data"):
        publish_to_agent(project.cfg, build_of(project.cfg), force=False, run_id="p2", log=log)

    record_blocking_verdict(
        project.cfg, "fits_agent_string_limit", fits_agent_string_limit(project.cfg), "r3"
    )
    with pytest.raises(StepFailure, match="fits_agent_string_limit failed on this data"):
        publish_to_agent(project.cfg, build_of(project.cfg), force=False, run_id="p3", log=log)


def test_force_does_not_publish_a_store_the_agent_cannot_load(
    project: Project, log: StepLog
) -> None:
    """As before the gate read this check: the agent would fail to load it, forced or not."""
    project = _evaluated(project, log, publish=TOO_SMALL)
    with pytest.raises(StepFailure) as refused:
        publish_to_agent(
            project.cfg, build_of(project.cfg), force=True, run_id="p", log=log, reason="r"
        )
    assert str(refused.value).endswith("the agent cannot load it (force does not override it)")
    assert not _live_store(project).exists()
    assert _forced_lines(log) == []


def test_force_publishes_a_store_its_size_check_never_judged(
    project: Project, log: StepLog
) -> None:
    """A missing verdict is what `--force-publish` is for: logged once, loudly."""
    project = _evaluated(project, log)
    judgement_memory(project.cfg).ledger.execute(
        "DELETE FROM verdicts WHERE check_name = ?", ("fits_agent_string_limit",)
    )
    publish_to_agent(
        project.cfg, build_of(project.cfg), force=True, run_id="p", log=log, reason="r"
    )
    assert _live_store(project).read_bytes() == project.layout.store_file.read_bytes()
    (forced,) = _forced_lines(log)
    assert forced.startswith("FORCED PUBLISH: fits_agent_string_limit has not run on this data")


# --- S3 -----------------------------------------------------------------------------------


def _keys(server: MotoS3Server, bucket: str) -> list[str]:
    client = boto3.client("s3", endpoint_url=server.endpoint_url, region_name=TEST_REGION)
    listed = client.list_objects_v2(Bucket=bucket)
    return sorted(item["Key"] for item in listed.get("Contents", []))


def _s3_settings(server: MotoS3Server, bucket: str, prefix: str) -> dict[str, Any]:
    return {
        "s3": {
            "bucket": bucket,
            "prefix": prefix,
            "region": TEST_REGION,
            "endpoint_url": server.endpoint_url,
        }
    }


@pytest.fixture
def buckets(s3: MotoS3Server) -> MotoS3Server:
    client = boto3.client("s3", endpoint_url=s3.endpoint_url, region_name=TEST_REGION)
    for name in ("bucket-one", "bucket-two"):
        client.create_bucket(Bucket=name)
    return s3


def test_the_s3_upload_goes_where_the_run_s_configuration_says(
    project: Project, log: StepLog, buckets: MotoS3Server
) -> None:
    """One build, two configurations in turn: each run's objects land in its bucket
    under its prefix, and the run's metadata names that place."""
    project = _evaluated(project, log)
    for bucket, prefix in (("bucket-one", "agents/first"), ("bucket-two", "second")):
        run = configure(project, publish=_s3_settings(buckets, bucket, prefix))
        result = publish_to_s3(
            run.cfg,
            build_of(run.cfg),
            force=False,
            run_id=f"s3-{bucket}",
            log=log,
            upload=upload_to_s3,
        )
        assert result is not None
        assert result.metadata["bucket"] == bucket
        assert result.metadata["prefix"] == f"{prefix}/"
        assert result.metadata["status"] == "published"
        keys = _keys(buckets, bucket)
        assert f"{prefix}/manifest.json" in keys and f"{prefix}/{STORE_FILENAME}" in keys
        assert all(key.startswith(f"{prefix}/") for key in keys)
    assert not any(key.startswith("second/") for key in _keys(buckets, "bucket-one"))


def test_s3_refuses_an_error_verdict_and_uploads_nothing(
    project: Project, log: StepLog, buckets: MotoS3Server
) -> None:
    project = _evaluated(project, log)
    plant_verdict(project, EvaluationVerdict(severity="ERROR", failures=(PLANTED_FAILURE,)))
    run = configure(project, publish=_s3_settings(buckets, "bucket-one", "p"))

    with pytest.raises(StepFailure, match="publishing refused: .*planted failure"):
        publish_to_s3(
            run.cfg, build_of(run.cfg), force=False, run_id="s3", log=log, upload=upload_to_s3
        )

    assert _keys(buckets, "bucket-one") == []


def test_s3_forced_upload_says_forced_publish_once(
    project: Project, log: StepLog, buckets: MotoS3Server
) -> None:
    project = _evaluated(project, log)
    plant_verdict(project, EvaluationVerdict(severity="ERROR", failures=(PLANTED_FAILURE,)))
    run = configure(project, publish=_s3_settings(buckets, "bucket-one", "p"))

    result = publish_to_s3(
        run.cfg,
        build_of(run.cfg),
        force=True,
        run_id="s3",
        log=log,
        upload=upload_to_s3,
        reason="r",
    )

    assert result is not None and "p/manifest.json" in _keys(buckets, "bucket-one")
    forced = _forced_lines(log)
    assert len(forced) == 1 and PLANTED_FAILURE in forced[0]


def test_s3_without_a_bucket_does_nothing(project: Project, log: StepLog) -> None:
    project = _evaluated(project, log)

    def never(*_args: Any) -> Any:
        raise AssertionError("no bucket is configured: nothing may be uploaded")

    assert (
        publish_to_s3(
            project.cfg, build_of(project.cfg), force=False, run_id="s3", log=log, upload=never
        )
        is None
    )
    assert any("S3 publishing skipped: no bucket configured" in line for line in log.infos)
