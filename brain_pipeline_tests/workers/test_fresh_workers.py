"""Issue 41's acceptance scenarios: every run is a fresh worker.

Each worker is an empty build directory with its own DAGSTER_HOME on one shared
PostgreSQL instance, sharing only PostgreSQL (the instance and the ledger) and an S3
bucket (the blobs), plus the corpus, the configuration and the agent's publish root;
every command is a separate process (harness.py). Each test asserts what a user sees:
exit codes, the lines printed, the texts the embedding service was paid for, the bytes
in the publish root and the S3 bucket.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import yaml

from brain_pipeline.corpus.store import parse_store
from brain_pipeline_tests.peers.notify_peers import WebhookServer, free_port
from brain_pipeline_tests.workers.harness import (
    PUBLISH_PREFIX,
    STORE_FILENAME,
    Cluster,
    Outcome,
    communicate_all,
    kill_group,
    sha256,
    wait_until,
)

EDIT = "Edge locations cache copies of your content close to the people who read it."
SECOND_EDIT = "A lifecycle rule moves objects older than thirty days to a colder class."
BATCH = 100  # embedding.batch_size: the texts of one request


def ok(outcome: Outcome) -> Outcome:
    assert outcome.code == 0, outcome.explain()
    return outcome


def store_ids(data: bytes | None) -> set[str]:
    assert data is not None, "nothing published"
    return {chunk.id for chunk in parse_store(data)}


def live_files(root: Path) -> dict[str, str]:
    """The store and the vectors the agent loads (the manifest carries times and runs)."""
    storage = root / "src" / "storage"
    return {
        name: sha256((storage / name).read_bytes()) for name in (STORE_FILENAME, "embeddings.bin")
    }


def publications(cluster: Cluster, worker: str) -> list[dict[str, object]]:
    outcome = ok(cluster.worker(worker).run("publications", "--json"))
    rows = json.loads(outcome.stdout)
    return list(rows["publications"] if isinstance(rows, dict) else rows)


def one_machine(cluster: Cluster, tmp_path: Path, edits: list[str]) -> dict[str, str]:
    """The store and vectors ONE machine publishes after the same history: the embedded
    default (SQLite ledger and blobs in its build directory), its own publish root."""
    solo = tmp_path / "solo"
    shutil.copytree(Path(__file__).resolve().parents[2] / "examples" / "curated-content",
                    solo / "corpus")  # fmt: skip
    config = solo / "brain.yaml"
    settings = yaml.safe_load(cluster.config.read_text(encoding="utf-8"))
    settings["corpus"]["path"] = str(solo / "corpus")
    settings["publish"] = {"root": str(solo / "agent")}
    settings.pop("state")
    config.write_text(yaml.safe_dump(settings), encoding="utf-8")
    worker = cluster.worker("solo")
    # Its own instance too (SQLite under its own DAGSTER_HOME): one machine, nothing shared.
    (solo / "dagster_home").mkdir()
    env = {"BRAIN_CONFIG": str(config), "DAGSTER_HOME": str(solo / "dagster_home")}
    ok(worker.materialize(env=env))
    for text in edits:
        first = sorted((solo / "corpus").rglob("*.md"))[0]
        with first.open("a", encoding="utf-8") as handle:
            handle.write(f"\n\n{text}\n")
        ok(worker.materialize(env=env))
    return live_files(solo / "agent")


def test_after_an_edit_on_a_fresh_worker_only_the_new_chunks_are_embedded_and_the_bytes_match_one_machine(  # noqa: E501
    cluster: Cluster, tmp_path: Path
) -> None:
    a, b = cluster.worker("a"), cluster.worker("b")
    first = ok(a.materialize())
    assert first.texts > 0, first.explain()
    before = store_ids(cluster.live_store())

    cluster.edit(EDIT)
    second = ok(b.materialize())
    new = store_ids(cluster.live_store()) - before
    assert new, "the edit made no new chunk"
    assert second.texts == len(new), second.explain()
    live = live_files(cluster.publish_root)
    assert cluster.s3_store_sha256() == live[STORE_FILENAME]
    assert live == one_machine(cluster, tmp_path, [EDIT])


def test_nothing_changed_on_a_fresh_worker_embeds_nothing_and_republishes_nothing(
    cluster: Cluster,
) -> None:
    ok(cluster.worker("a").materialize())
    published, keys = cluster.published(), cluster.s3_keys()
    store = cluster.s3_store_sha256()

    again = ok(cluster.worker("b").materialize())
    assert again.texts == 0 and again.queries == 0, again.explain()
    assert cluster.published() == published
    assert cluster.s3_keys() == keys and cluster.s3_store_sha256() == store
    assert len(publications(cluster, "b")) == 1


def test_publications_status_baselines_and_rollback_are_the_same_from_every_worker(
    cluster: Cluster,
) -> None:
    a, b, c = (cluster.worker(name) for name in "abc")
    ok(a.materialize())
    first_live = live_files(cluster.publish_root)
    cluster.edit(EDIT)
    ok(a.materialize())

    # A worker that never ran anything sees what A recorded.
    assert publications(cluster, "c") == publications(cluster, "a")
    assert len(publications(cluster, "c")) == 2
    assert c.run("status").stdout == a.run("status").stdout
    # The evaluations of past publications (the regression baseline's history).
    history = json.loads(ok(a.run("eval", "--history", "--json")).stdout)
    assert len(history) == 2, history
    assert json.loads(ok(c.run("eval", "--history", "--json")).stdout) == history
    live = str(cluster.publish_root / "src" / "storage")
    # The regression and known-item baselines: the same verdict against them everywhere.
    judged = json.loads(ok(a.run("eval", "--json", "--store", live)).stdout)
    assert json.loads(ok(c.run("eval", "--json", "--store", live)).stdout) == judged

    # Rollback from a third worker restores A's first publication, and A sees it.
    rolled = ok(b.run("rollback"))
    assert live_files(cluster.publish_root) == first_live, rolled.explain()
    assert cluster.s3_store_sha256() == first_live[STORE_FILENAME]
    after = publications(cluster, "a")
    assert len(after) == 3 and publications(cluster, "c") == after


def test_s3_clean_up_never_deletes_a_generation_another_worker_keeps(cluster: Cluster) -> None:
    a, b = cluster.worker("a"), cluster.worker("b")
    kept: list[str] = []
    for edit in (None, EDIT):
        if edit:
            cluster.edit(edit)
        ok(a.materialize())
        sha = cluster.s3_store_sha256()
        assert sha is not None
        kept.append(sha)
    cluster.edit(SECOND_EDIT)
    ok(b.materialize())

    keys = cluster.s3_keys()
    for sha in kept:
        key = f"{PUBLISH_PREFIX}objects/{sha}/{STORE_FILENAME}"
        assert key in keys, f"A's generation {sha[:12]} was deleted: {sorted(keys)}"
    # ...and a rollback from B to A's first publication can still restore it from S3.
    first_id = str(publications(cluster, "a")[-1]["id"])
    ok(b.run("rollback", "--to", first_id))
    assert cluster.s3_store_sha256() == kept[0]


def test_a_worker_killed_mid_embedding_is_resumed_by_another_paying_at_most_the_batch_in_flight(
    cluster: Cluster,
) -> None:
    gemini = cluster.gemini
    gemini.configure(hold_after_requests=4)  # the fifth request is held unanswered
    doomed = cluster.worker("a").start("materialize")
    try:
        assert gemini.holding.wait(timeout=300), "the worker never reached its fifth request"
    finally:
        kill_group(doomed)  # kill -9, mid-embedding
    assert cluster.texts_embedded() == 4 * BATCH  # received by the worker before it died
    # What the killed worker left: nothing published anywhere.
    assert cluster.live_store() is None and cluster.s3_store_sha256() is None
    # The held request is answered to nobody once released: paid for, never received.
    gemini.configure(hold_after_requests=None)
    wait_until(lambda: len(gemini.stats().batch_sizes) == 5, timeout=60)
    paid_before_death = cluster.texts_embedded()  # 4 batches received, 1 in flight

    resumed = ok(cluster.worker("b").materialize())
    total = len(store_ids(cluster.live_store()))
    assert resumed.texts <= total - paid_before_death + BATCH, resumed.explain()
    assert cluster.s3_store_sha256() == sha256(cluster.live_store() or b"")


def test_two_workers_started_at_once_one_builds_and_the_other_waits_or_names_the_holder(
    cluster: Cluster,
) -> None:
    a, b = cluster.worker("a"), cluster.worker("b")
    procs = {"a": a.start("materialize"), "b": b.start("materialize")}
    done = communicate_all(procs)
    codes = {name: code for name, (code, _, _) in done.items()}
    report = {name: (code, err[-2000:]) for name, (code, _, err) in done.items()}
    assert set(codes.values()) <= {0, 75} and 0 in codes.values(), report
    for code, _, err in done.values():
        if code == 75:
            assert "held by pid" in err, report
    # One build: every text paid once; nothing torn: the bucket and the folder agree.
    total = len(store_ids(cluster.live_store()))
    assert cluster.texts_embedded() == total, report
    assert cluster.s3_store_sha256() == sha256(cluster.live_store() or b"")
    assert len(publications(cluster, "a")) == 1, report


def test_the_same_under_the_multiprocess_executor_each_step_in_its_own_empty_folder(
    cluster: Cluster,
) -> None:
    def run(name: str) -> Outcome:
        argv = [sys.executable, "-m", "brain_pipeline_tests.workers.multiprocess_run"]
        outcome = cluster.worker(name).run(argv=argv)
        assert outcome.code == 0 and "succeeded" in outcome.stdout, outcome.explain()
        pids = [line.rsplit(" ", 1)[1] for line in outcome.stdout.splitlines()
                if line.startswith("step ")]  # fmt: skip
        assert len(pids) >= 5 and len(set(pids)) == len(pids), outcome.stdout
        return outcome

    first = run("a")
    assert first.texts > 0
    before = store_ids(cluster.live_store())
    cluster.edit(EDIT)
    second = run("b")
    new = store_ids(cluster.live_store()) - before
    assert new and second.texts == len(new), second.explain()
    assert cluster.s3_store_sha256() == sha256(cluster.live_store() or b"")
    unchanged = cluster.published()
    third = run("c")
    assert third.texts == third.queries == 0, third.explain()
    assert cluster.published() == unchanged


def test_a_notification_is_claimed_once_for_every_worker(cluster: Cluster) -> None:
    """Worker A's blocked run could not reach the webhook (down); once it is back, the
    daemon of worker B delivers the pending message, and neither A nor a third worker
    sends it again: the delivery claim is the same from every worker."""
    port = free_port()
    cluster.thresholds = {"bm25": {"min_ndcg_at_10": 0.99, "max_misses": 0}}
    cluster.write_config(
        notify__webhook_url=f"http://127.0.0.1:{port}/hooks/workers",
        notify__max_attempts=1,
        notify__retry_backoff_seconds=0.1,
    )
    blocked = cluster.worker("a").materialize()
    assert blocked.code == 1, blocked.explain()
    assert "message" in blocked.stderr, blocked.explain()
    run_id = blocked.line("FAILED: run ").split()[2]
    tick = [sys.executable, "-m", "brain_pipeline_tests.workers.notify_tick", run_id]
    with WebhookServer.start(port=port) as hook:
        ok(cluster.worker("b").run(argv=tick))
        assert [body["event"] for body in hook.bodies] == ["blocked"]
        for name in ("a", "c"):
            ok(cluster.worker(name).run(argv=tick))
        assert [body["event"] for body in hook.bodies] == ["blocked"]
        assert hook.bodies[0]["run_id"] == run_id


def history(cluster: Cluster, worker: str, chunk_id: str) -> dict[str, object]:
    """`brain-pipeline history ID --json` on `worker`: what its chunk history says."""
    entry = json.loads(ok(cluster.worker(worker).run("history", chunk_id, "--json")).stdout)
    assert isinstance(entry, dict)
    return entry


def test_a_fresh_worker_explains_the_chunk_ids_another_worker_recorded(cluster: Cluster) -> None:
    """The chunk history is the ledger's: worker B, which never ran anything, explains an
    id worker A's build wrote; after an edit built on B, a third worker explains both the
    ids A's store held (first seen on A, no longer live when the edit replaced them) and
    the new ones B's store added."""
    a = cluster.worker("a")
    ok(a.materialize())
    first = {chunk.id: chunk for chunk in parse_store(cluster.live_store() or b"")}
    some = sorted(first)[0]
    seen = history(cluster, "b", some)
    assert seen["text"] == first[some].content and seen["live_in_latest"] is True
    assert (seen["area"], seen["source"]) == (first[some].area, first[some].source)

    cluster.edit(EDIT)
    ok(cluster.worker("b").materialize())
    now = store_ids(cluster.live_store())
    gone, new = sorted(set(first) - now), sorted(now - set(first))
    assert new, "the edit made no new chunk"
    added = history(cluster, "c", new[0])
    assert added["live_in_latest"] is True and EDIT in str(added["text"])
    assert str(added["first_seen"]) >= str(seen["first_seen"])
    for key in gone:  # the chunk the appended paragraph replaced, if any
        old = history(cluster, "c", key)
        assert old["live_in_latest"] is False and old["text"] == first[key].content
        assert old["first_seen"] == seen["first_seen"] == old["last_seen"]
    kept = history(cluster, "c", sorted(now & set(first))[0])
    assert kept["live_in_latest"] is True and kept["first_seen"] == seen["first_seen"]
