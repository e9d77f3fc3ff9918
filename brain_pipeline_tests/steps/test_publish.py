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
from brain_pipeline.evaluation.service import evaluate_build
from brain_pipeline.evaluation.verdict import EvaluationVerdict
from brain_pipeline.publishing.local import storage_dirs
from brain_pipeline.steps.contract import StepFailure
from brain_pipeline.steps.publish import publish_to_agent, publish_to_s3, upload_to_s3
from brain_pipeline_tests.peers.moto_s3 import TEST_REGION, MotoS3Server
from brain_pipeline_tests.steps.built import build, configure, plant_verdict, write_fixture
from brain_pipeline_tests.steps.conftest import Project, StepLog

PLANTED_WARNING = "planted warning: 'paragraph chunk store' (aws) became a miss"
PLANTED_FAILURE = "planted failure: bm25 nDCG@10 0.100 < minimum 0.900"


def _evaluated(project: Project, log: StepLog, *, miss: bool = False, **sections: Any) -> Project:
    """Built, and evaluated once by the one evaluation code path (its verdict recorded)."""
    project = configure(project, **sections)
    build(project, log)
    write_fixture(project, miss=miss)
    evaluate_build(project.cfg, run_id="eval-run")
    return project


def _live_store(project: Project) -> Path:
    return storage_dirs(project.cfg.publish_root())[0] / STORE_FILENAME


def _forced_lines(log: StepLog) -> list[str]:
    return [line for line in log.infos + log.warnings if "FORCED PUBLISH" in line]


def test_a_passing_verdict_publishes_the_build(project: Project, log: StepLog) -> None:
    project = _evaluated(project, log, evaluation={"thresholds": {"bm25": {"max_misses": 0}}})

    result = publish_to_agent(project.cfg, project.layout, force=False, run_id="p", log=log)

    assert _live_store(project).read_bytes() == project.layout.store_file.read_bytes()
    assert result.metadata["status"] == "updated"
    assert result.metadata["decision"] == "the retrieval evaluation of this data passed"
    assert result.metadata["verdict"].startswith("retrieval evaluation passed: bm25 misses 0")
    assert _forced_lines(log) == []


def test_a_warn_verdict_publishes_with_the_warning_in_the_reason(
    project: Project, log: StepLog
) -> None:
    project = _evaluated(project, log)
    plant_verdict(project, EvaluationVerdict(severity="WARN", warnings=(PLANTED_WARNING,)))

    result = publish_to_agent(project.cfg, project.layout, force=False, run_id="p", log=log)

    assert _live_store(project).read_bytes() == project.layout.store_file.read_bytes()
    assert result.metadata["decision"] == (
        f"the retrieval evaluation of this data passed with warnings: {PLANTED_WARNING}"
    )
    assert _forced_lines(log) == []


def test_an_error_verdict_blocks_and_publishes_nothing(project: Project, log: StepLog) -> None:
    project = _evaluated(
        project, log, miss=True, evaluation={"thresholds": {"bm25": {"max_misses": 0}}}
    )

    with pytest.raises(StepFailure) as refused:
        publish_to_agent(project.cfg, project.layout, force=False, run_id="p", log=log)

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
        publish_to_agent(project.cfg, project.layout, force=False, run_id="p", log=log)
    assert not _live_store(project).exists()

    write_fixture(project, miss=True)  # now the bound fails: 1 miss > 0
    assert evaluate_build(project.cfg).verdict.severity == "ERROR"
    plant_verdict(project, EvaluationVerdict(severity="PASS"))
    result = publish_to_agent(project.cfg, project.layout, force=False, run_id="p", log=log)
    assert _live_store(project).read_bytes() == project.layout.store_file.read_bytes()
    assert result.metadata["decision"] == "the retrieval evaluation of this data passed"


@pytest.mark.parametrize("how", ["argument", "configuration"])
def test_force_publishes_a_failed_build_and_says_forced_publish_once(
    project: Project, log: StepLog, how: str
) -> None:
    publish = {"force": True} if how == "configuration" else {}
    project = _evaluated(
        project,
        log,
        miss=True,
        evaluation={"thresholds": {"bm25": {"max_misses": 0}}},
        publish=publish,
    )

    result = publish_to_agent(
        project.cfg, project.layout, force=how == "argument", run_id="p", log=log
    )

    assert _live_store(project).read_bytes() == project.layout.store_file.read_bytes()
    assert result.metadata["decision"].startswith(
        "FORCED PUBLISH: the retrieval evaluation of this data failed: bm25: 1 misses > maximum 0"
    )
    assert _forced_lines(log) == [result.metadata["decision"]]


def test_an_empty_store_is_never_published_even_forced_on_a_passing_verdict(
    project: Project, log: StepLog
) -> None:
    project = _evaluated(project, log)
    for path in (project.root / "corpus").rglob("*.md"):
        path.unlink()
    build(project, log)  # the store now holds 0 chunks
    evaluate_build(project.cfg)
    plant_verdict(project, EvaluationVerdict(severity="PASS"))

    for force in (False, True):
        with pytest.raises(StepFailure, match=r"refusing to publish an empty store \(0 chunks\)"):
            publish_to_agent(project.cfg, project.layout, force=force, run_id="p", log=log)
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
        publish_to_agent(project.cfg, project.layout, force=False, run_id="p", log=log)

    assert str(refused.value) == (
        "publishing refused: refusing to publish: the retrieval evaluation has not run "
        "on this data (set force to override)"
    )
    assert not _live_store(project).exists()


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
            run.cfg, run.layout, force=False, run_id=f"s3-{bucket}", log=log, upload=upload_to_s3
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
        publish_to_s3(run.cfg, run.layout, force=False, run_id="s3", log=log, upload=upload_to_s3)

    assert _keys(buckets, "bucket-one") == []


def test_s3_forced_upload_says_forced_publish_once(
    project: Project, log: StepLog, buckets: MotoS3Server
) -> None:
    project = _evaluated(project, log)
    plant_verdict(project, EvaluationVerdict(severity="ERROR", failures=(PLANTED_FAILURE,)))
    run = configure(project, publish=_s3_settings(buckets, "bucket-one", "p"))

    result = publish_to_s3(
        run.cfg, run.layout, force=True, run_id="s3", log=log, upload=upload_to_s3
    )

    assert result is not None and "p/manifest.json" in _keys(buckets, "bucket-one")
    forced = _forced_lines(log)
    assert len(forced) == 1 and PLANTED_FAILURE in forced[0]


def test_s3_without_a_bucket_does_nothing(project: Project, log: StepLog) -> None:
    project = _evaluated(project, log)

    def never(*_args: Any) -> Any:
        raise AssertionError("no bucket is configured: nothing may be uploaded")

    assert (
        publish_to_s3(project.cfg, project.layout, force=False, run_id="s3", log=log, upload=never)
        is None
    )
    assert any("S3 publishing skipped: no bucket configured" in line for line in log.infos)
