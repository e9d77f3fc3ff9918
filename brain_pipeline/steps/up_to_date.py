"""Could a full run change anything? Answered from the last successful run's record.

A re-run after nothing changed used to cost seconds of fixed overhead (importing and
opening Dagster, writing a run's events) to conclude what a few stats can prove. At the
end of a successful full run, `record_successful_run` writes `state/last-run.json`:
every input's digest (corpus, fixture, configuration, code, embedding provider and key)
and the signature (utils.file_signature, the project's one "unchanged" rule) of every
file the run's outcome lives in: the build's artifacts and records, and each file of
the live publication, which is verified against its manifest first. `check` compares
the present with that record; `materialize` without a selection skips the run only when
everything is equal. Any doubt means a run: a missing, unreadable or foreign record, a
changed or missing file, an interrupted publication, a configured S3 bucket (the bucket
is only checked by a run) — each is a reason, and the first one found is reported.

Nothing here imports Dagster, so the answer costs a corpus walk (settled files are not
read again: the observation's file index) and a few hundred stats.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from brain_pipeline.config import BrainConfig, CorpusNotFoundError
from brain_pipeline.corpus.discovery import STATUS_SKIPPED
from brain_pipeline.corpus.observation import CorpusSnapshot, load_snapshot, observe_corpus
from brain_pipeline.state.layout import StateLayout
from brain_pipeline.state.records import read_record
from brain_pipeline.utils.atomic import atomic_write_bytes
from brain_pipeline.utils.damage import healed
from brain_pipeline.utils.digest import file_sha256_or, value_digest
from brain_pipeline.utils.file_signature import FileSignature

RECORD_FORMAT = 1
_SOURCE_ROOT = Path(__file__).resolve().parents[1]


def record_path(layout: StateLayout) -> Path:
    return layout.state_dir / "last-run.json"


@dataclass(frozen=True)
class UpToDate:
    """The answer: `current` with the run and publication time it rests on, else why not."""

    current: bool
    reason: str
    run_id: str | None = None
    published_at: str | None = None

    def message(self) -> str:
        if self.current:
            return (
                f"up to date: nothing changed since run {self.run_id} "
                f"(published {self.published_at or 'at an unknown time'})"
            )
        return f"running: {self.reason}"


# --- the inputs ----------------------------------------------------------------------------


def package_version() -> str:
    """The installed distribution's version ('unknown' when run from a bare checkout)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("brain-pipeline")
    except PackageNotFoundError:
        return "unknown"


def source_digest(root: Path = _SOURCE_ROOT) -> str:
    """The signatures of every module of the package: an edit to the code is a change even
    when no code version was bumped (a stat per file, nothing read)."""
    rows: list[tuple[str, list[int]]] = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(names):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                signature = FileSignature.of(path)
                rows.append((os.path.relpath(path, root), signature.as_list() if signature else []))
    return value_digest(rows)


def code_versions(cfg: BrainConfig) -> dict[str, str]:
    """The package version and the code version of each asset that has one."""
    from brain_pipeline.steps.embed import embeddings_code_version
    from brain_pipeline.steps.ingest import STORE_CODE_VERSION, chunks_code_version
    from brain_pipeline.steps.publish import PUBLISH_CODE_VERSION

    return {
        "package": package_version(),
        "knowledge_chunks": chunks_code_version(cfg),
        "knowledge_store": STORE_CODE_VERSION,
        "embeddings": embeddings_code_version(cfg),
        "published_local": PUBLISH_CODE_VERSION,
    }


def key_digest(key: str | None, salt: str) -> str | None:
    """A salted digest of the embedding key: tells a changed key from the same one
    without the record ever holding (or allowing a dictionary lookup of) the key."""
    return None if key is None else value_digest([salt, key])[:16]


def corpus_identity(snapshot: CorpusSnapshot) -> str:
    """The corpus digest plus what the walk skipped and why: a new ignored or unreadable
    file changes the run's report, so it is a change too (mtimes alone are not)."""
    skipped = [
        (e.source, e.status, e.reason) for e in snapshot.entries if e.status == STATUS_SKIPPED
    ]
    return value_digest([snapshot.digest, snapshot.root, snapshot.areas, skipped])


def current_inputs(cfg: BrainConfig, layout: StateLayout, salt: str) -> dict[str, Any]:
    """Every input of a full run but the corpus (the costly one, read last)."""
    return {
        "config": value_digest(cfg.model_dump(mode="json")),
        "provider": cfg.effective_provider(),
        "provider_label": cfg.provider_label(),
        "key": key_digest(cfg.gemini_api_key(), salt),
        "fixture": file_sha256_or(cfg.evaluation.fixture, "missing"),
        "code": code_versions(cfg),
        "source": source_digest(),
    }


def observed_corpus(cfg: BrainConfig, layout: StateLayout) -> str:
    """The corpus identity as the `corpus` observation would see it, writing nothing."""
    snapshot = observe_corpus(cfg.corpus_root(), layout, limits=cfg.ingest_limits(), record=False)
    return corpus_identity(snapshot)


# --- the files a run's outcome lives in ------------------------------------------------------


def _outcome_files(layout: StateLayout) -> list[Path]:
    """The build's artifacts and records: a later run (UI, schedule, a selection) that
    changed any of them rewrote it, which changes its signature."""
    files = [layout.store_file, layout.embeddings_file, layout.eval_record, layout.eval_baseline]
    return files + sorted(layout.assets_dir.glob("*.json"))


def _signatures(paths: Iterable[Path | str]) -> dict[str, list[int] | None]:
    out: dict[str, list[int] | None] = {}
    for path in paths:
        signature = FileSignature.of(path)
        out[str(path)] = signature.as_list() if signature is not None else None
    return out


def _listing(directory: Path) -> list[str]:
    try:
        return sorted(os.listdir(directory))
    except FileNotFoundError:
        return []


class NotVerified(Exception):
    """The live publication is not (provably) what the last run built: no record is kept."""


def verified_publication(cfg: BrainConfig, layout: StateLayout) -> dict[str, Any]:
    """The live publication, checked against its manifest and against the build.

    Every artifact the src manifest names must be in every storage copy with the sha256
    the manifest gives, proven by the stamp the publish step took of that file (still
    matching by the one rule) — nothing is hashed again; each copy's manifest must say
    the same; and the store the manifest publishes must be the build's store. Returns
    what `check` compares later: the storage directories, their listings and the
    signatures of every live file. Raises NotVerified otherwise.
    """
    from brain_pipeline.publishing.commit import intent_path, pending_commit
    from brain_pipeline.publishing.local import live_manifest, storage_dirs
    from brain_pipeline.publishing.manifest import MANIFEST_FILENAME, PublishManifest

    root = cfg.publish_root()
    if pending_commit(root) is not None:
        raise NotVerified("a publication commit awaits recovery")
    manifest = live_manifest(root)
    if manifest is None:
        raise NotVerified("nothing is published")
    published = read_record(layout, "published_local")
    store = read_record(layout, "knowledge_store")
    if published is None or store is None:
        raise NotVerified("no record of the publication or of the store")
    build_store = store.outputs.get(layout.store_file.name)
    if build_store is None or not build_store.still_matches(layout.store_file):
        raise NotVerified("the build's store is not the one its record describes")
    if manifest.store.sha256 != build_store.sha256:
        raise NotVerified("the live store is not the build's")
    targets = storage_dirs(root)
    live: list[Path] = []
    for directory in targets:
        try:
            copy = PublishManifest.from_json((directory / MANIFEST_FILENAME).read_bytes())
        except (OSError, ValueError, UnicodeDecodeError):
            raise NotVerified(f"{directory / MANIFEST_FILENAME} is missing or unreadable") from None
        if not copy.same_content(manifest):
            raise NotVerified(f"{directory / MANIFEST_FILENAME} differs from src's")
        names = {a.filename for a in manifest.artifacts()} | {MANIFEST_FILENAME}
        extra = set(_listing(directory)) - names
        if extra:
            raise NotVerified(f"{directory} holds files no manifest names: {sorted(extra)}")
        for artifact in manifest.artifacts():
            path = directory / artifact.filename
            stamp = published.outputs.get(str(path))
            if stamp is None or stamp.sha256 != artifact.sha256 or not stamp.still_matches(path):
                raise NotVerified(f"{path} is not the file the manifest describes")
            live.append(path)
        live.append(directory / MANIFEST_FILENAME)
    # What `check` lists instead of importing the publishing code: the root (a new
    # `dist` adds a target), the folder an interrupted commit leaves its intent in, and
    # each storage copy (a file added to it).
    intent_dir = intent_path(root).parent
    return {
        "root": str(root),
        "intent_dir": str(intent_dir),
        "listings": {str(d): _listing(d) for d in [root, intent_dir, *targets]},
        "files": _signatures(live),
        "published_at": manifest.published_at,
    }


# --- the record -------------------------------------------------------------------------------


def forget(layout: StateLayout) -> None:
    """Remove the record: a run is starting, so until it succeeds nothing is proven."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(record_path(layout))


def record_successful_run(
    cfg: BrainConfig, run_id: str, inputs_at_start: Mapping[str, Any], *, clock: Any = None
) -> str | None:
    """Write the record after a successful full run; None when written, else why not.

    Called while the run still holds its locks, so nothing moves between the run's last
    write and these stats. `inputs_at_start` is `current_inputs` taken before the run:
    an input edited while the run read it (the fixture, a module) is not what the run
    used, so then, when the publication cannot be verified, or when S3 publishing is
    configured (only a run checks the bucket), no record is written and the next run
    runs in full.
    """
    layout = StateLayout.of(cfg.build_dir)
    forget(layout)
    if cfg.publish.s3.bucket:
        return "S3 publishing is configured (only a run checks the bucket)"
    inputs = current_inputs(cfg, layout, run_id)
    if inputs != dict(inputs_at_start):
        return "an input changed during the run"
    try:
        publication = verified_publication(cfg, layout)
    except NotVerified as exc:
        return str(exc)
    # The corpus as the run observed it (the snapshot its store was built from: still in
    # memory, the observation stored it in this process), not as it is now: a file
    # edited during the run then differs at the next check, which runs.
    store = read_record(layout, "knowledge_store")
    digest = store.facts.get("corpus_digest") if store is not None else None
    try:
        snapshot = load_snapshot(layout, str(digest))
    except (OSError, ValueError):
        return "the corpus snapshot of the run cannot be read"
    corpus = corpus_identity(snapshot)
    now = (clock or (lambda: datetime.now(UTC)))()
    body = {
        "format": RECORD_FORMAT,
        "run_id": run_id,
        "finished_at": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "inputs": {**inputs, "corpus": corpus},
        "build": _signatures(_outcome_files(layout)),
        "publication": publication,
    }
    data = json.dumps(body, sort_keys=True, indent=1) + "\n"
    atomic_write_bytes(record_path(layout), data.encode("utf-8"))
    return None


def _read(layout: StateLayout) -> dict[str, Any] | None:
    path = record_path(layout)

    def load() -> dict[str, Any] | None:
        try:
            body = json.loads(path.read_bytes())
        except FileNotFoundError:
            return None
        if not isinstance(body, dict) or body.get("format") != RECORD_FORMAT:
            raise ValueError("not a last-run record of this format")
        return body

    return healed(path, load, what="last-run record", consequence="the next run runs in full")


def _first_difference(recorded: Mapping[str, Any], now: Mapping[str, Any]) -> str | None:
    names = {
        "config": "the configuration changed",
        "provider": "the embedding provider changed",
        "provider_label": "the embedding provider changed",
        "key": "the embedding key changed",
        "fixture": "the evaluation fixture changed",
        "code": "the code version changed",
        "source": "the code changed",
        "corpus": "the corpus changed",
    }
    for key, why in names.items():
        if key in now and recorded.get(key) != now[key]:
            return why
    return None


def _changed_file(recorded: Mapping[str, Any]) -> str | None:
    for path, signature in recorded.items():
        now = FileSignature.of(path)
        if (now.as_list() if now is not None else None) != signature:
            return path
    return None


def check(cfg: BrainConfig) -> UpToDate:
    """Whether a full run could change anything now (cheapest comparisons first)."""
    layout = StateLayout.of(cfg.build_dir)
    body = _read(layout)
    if body is None:
        return UpToDate(False, "no successful full run is recorded for this build directory")
    run_id = str(body.get("run_id"))
    if cfg.publish.s3.bucket:
        return UpToDate(False, "S3 publishing is configured (only a run checks the bucket)")
    recorded_inputs = dict(body.get("inputs") or {})
    publication = dict(body.get("publication") or {})
    if publication.get("root") != str(cfg.publish_root()):
        return UpToDate(False, "the publish root changed")
    build = dict(body.get("build") or {})
    changed = _changed_file(build)
    if changed:
        return UpToDate(False, f"{changed} changed since run {run_id}")
    if set(map(str, _outcome_files(layout))) != set(build):
        return UpToDate(False, f"another asset was materialised since run {run_id}")
    changed = _changed_file(dict(publication.get("files") or {}))
    if changed:
        return UpToDate(False, f"the live publication changed ({changed})")
    listings = dict(publication.get("listings") or {})
    if not listings:
        return UpToDate(False, "the record lists no publication folders")
    for directory, names in listings.items():
        if _listing(Path(directory)) != names:
            if directory == publication.get("intent_dir"):
                return UpToDate(False, "a publication commit awaits recovery")
            return UpToDate(False, f"{directory} holds other files than were published")
    difference = _first_difference(recorded_inputs, current_inputs(cfg, layout, run_id))
    if difference:
        return UpToDate(False, difference)
    try:
        corpus = observed_corpus(cfg, layout)
    except (CorpusNotFoundError, OSError) as exc:
        return UpToDate(False, f"the corpus cannot be read: {exc}")
    if corpus != recorded_inputs.get("corpus"):
        return UpToDate(False, "the corpus changed")
    return UpToDate(True, "", run_id, publication.get("published_at"))
