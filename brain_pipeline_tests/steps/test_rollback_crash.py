"""kill -9 at every step of a rollback: one consistent set, and a re-run finishes it.

The history and the archive are made by the same functions a publishing run uses
(`publish_local`, `steps.publications.record_in_history`); the rollback runs in a forked
child (`publishing.crash`) killed with SIGKILL at a traced file-system call. Afterwards,
with `recover_publication` run as the next run would, src and dist hold exactly one of
the two publications (byte for byte, the same in both), and running the rollback again
leaves the earlier one live with a history that says so.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from brain_pipeline.config import BrainConfig, memory_of
from brain_pipeline.publishing.local import inspect_publication, publish_local, recover_publication
from brain_pipeline.publishing.manifest import build_manifest
from brain_pipeline.publishing.publication_log import read_history
from brain_pipeline.retrieval.vectors import decode_embeddings
from brain_pipeline.steps.publications import record_in_history
from brain_pipeline_tests.publishing.conftest import AGENT_MODEL, SampleBuild, make_build
from brain_pipeline_tests.publishing.crash import PublishZygote

OLD = make_build(salt="good ")
BAD = make_build(salt="bad ")


class _Quiet:
    def info(self, message: str) -> None: ...

    def warning(self, message: str) -> None: ...


@pytest.fixture(scope="module")
def zygote() -> Iterator[PublishZygote]:
    forker = PublishZygote()
    try:
        yield forker
    finally:
        forker.close()


def config_of(base: Path) -> dict[str, Any]:
    return {
        "build_dir": str(base / "build"),
        "publish": {"root": str(base / "agent"), "agent_query_model": AGENT_MODEL},
        "evaluation": {"fixture": str(base / "no-fixture.json")},
    }


def prepare(base: Path) -> None:
    """Two publications, OLD then BAD, recorded and archived as a run records them."""
    (base / "agent" / "dist").mkdir(parents=True)
    cfg = BrainConfig.model_validate(config_of(base))
    for n, build in enumerate((OLD, BAD), start=1):
        manifest = build_manifest(
            build.store,
            build.embeddings,
            None,
            None,
            f"corpus{n}",
            f"run{n}",
            published_at=f"2026-01-0{n}T03:00:00Z",
        )
        report = publish_local(
            build.store,
            build.embeddings,
            cfg.publish_root(),
            agent_query_model=AGENT_MODEL,
            manifest=manifest,
        )
        record_in_history(cfg, report, None, run_id=f"run{n}", trigger="test", log=_Quiet())


def live_set(base: Path) -> list[tuple[bytes, bytes]]:
    return [
        (
            (base / "agent" / d / "storage" / "knowledge-store.json").read_bytes(),
            (base / "agent" / d / "storage" / "embeddings.bin").read_bytes(),
        )
        for d in ("src", "dist")
    ]


def expected(build: SampleBuild) -> list[tuple[bytes, bytes]]:
    return [(build.store_bytes, build.embeddings_bytes)] * 2


def test_kill_9_anywhere_in_a_rollback_leaves_one_consistent_set(
    tmp_path: Path, zygote: PublishZygote
) -> None:
    template = tmp_path / "template"
    prepare(template)
    full = tmp_path / "full"
    shutil.copytree(template, full)
    done = zygote.run({"action": "rollback", "config": config_of(full)}, tmp_path)
    assert done.returncode == 0, done.stderr
    assert live_set(full) == expected(OLD)
    restored = decode_embeddings(live_set(full)[0][1])  # the agent's reader takes it
    assert list(restored.ids) == [c.id for c in OLD.chunks]
    calls = len(done.trace)
    assert calls > 10

    outcomes = set()
    for kill_at in sorted({*range(1, calls + 1, max(1, calls // 25)), calls}):
        base = tmp_path / f"kill{kill_at}"
        shutil.copytree(template, base)
        spec = {"action": "rollback", "config": config_of(base)}
        result = zygote.run(spec, tmp_path, kill_at=kill_at)
        assert result.killed, (kill_at, result.stderr)
        recover_publication(base / "agent")
        publication = inspect_publication(base / "agent")
        assert publication.consistent, (kill_at, publication.copies)
        now = live_set(base)
        assert now in (expected(OLD), expected(BAD)), kill_at
        outcomes.add(now == expected(OLD))
        memory = memory_of(BrainConfig.model_validate(config_of(base)))
        read_history(memory)  # never left unreadable

        # The operator runs the same rollback again: it finishes (or says it is done).
        again = zygote.run(spec, tmp_path)
        history = read_history(memory)
        assert live_set(base) == expected(OLD), (kill_at, again.stderr)
        live = history.live()
        assert live is not None and live.store_sha256 == OLD.store.sha256, kill_at
        assert history.hold() is not None and history.hold().store_sha256 == BAD.store.sha256
        shutil.rmtree(base)
    assert outcomes == {True, False}  # kills landed both before and after the commit
