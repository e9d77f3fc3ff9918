"""manifest.json: what a publication contains, written beside the artifacts it describes.

The manifest lets `brain-pipeline status` (and a person) tell what is live without
re-reading the store: hashes and sizes of the artifacts, chunks per area, the embedding
model and how many chunks it covers, the evaluation figures that let it through, and
the corpus digest it was built from.

Two fields change on every run even when nothing else does: `published_at` and
`run_id`. They are *provenance*, not *content*: `same_content` ignores them, so a
re-publish of identical artifacts keeps the earlier manifest (and its timestamp, which
then truthfully says when these bytes went live) instead of counting as a change.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from brain_pipeline.corpus.observation import corpus_digest
from brain_pipeline.corpus.store import STORE_FILENAME, Chunk, parse_store
from brain_pipeline.publishing.source import ArtifactSource, read_vectors_header
from brain_pipeline.retrieval.vectors import EMBEDDINGS_FILENAME, NotAnEmbeddingStore
from brain_pipeline.utils.markdown import md_code, md_text

MANIFEST_FILENAME = "manifest.json"
MANIFEST_FORMAT = 1

# Fields that record *when/which run* published, not *what* was published.
_PROVENANCE_FIELDS = ("published_at", "run_id")


@dataclass(frozen=True)
class ArtifactInfo:
    """One published file: its name, byte size and lower-case hex SHA-256."""

    filename: str
    size: int
    sha256: str

    @classmethod
    def of_source(cls, filename: str, source: ArtifactSource) -> ArtifactInfo:
        """From the source's known digest and size: the file is not read."""
        return cls(filename=filename, size=source.size, sha256=source.sha256)


@dataclass(frozen=True)
class PublishManifest:
    """Everything manifest.json records about one publication.

    `embeddings` is None when no embeddings.bin is part of the publication; then
    `embeddings_note` says why (no vectors built, wrong model for the agent, ...).
    `vector_coverage` is the fraction of store chunks that have a vector in the
    published embeddings (0.0 without embeddings).
    """

    store: ArtifactInfo
    chunk_count: int
    chunks_per_area: dict[str, int]
    embeddings: ArtifactInfo | None = None
    embedding_model: str | None = None
    embedding_dimension: int | None = None
    vectors_count: int = 0
    vector_coverage: float = 0.0
    embeddings_note: str | None = None
    evaluation: dict[str, Any] = field(default_factory=dict)
    corpus_digest: str | None = None
    run_id: str | None = None
    published_at: str = ""
    format: int = MANIFEST_FORMAT

    # -- derived views -----------------------------------------------------------------

    def artifacts(self) -> list[ArtifactInfo]:
        """The files this manifest vouches for, in publication order (vectors first)."""
        return [a for a in (self.embeddings, self.store) if a is not None]

    def without_embeddings(self, note: str) -> PublishManifest:
        """The same publication minus embeddings.bin, recording why it was left out."""
        return replace(
            self,
            embeddings=None,
            embedding_model=None,
            embedding_dimension=None,
            vectors_count=0,
            vector_coverage=0.0,
            embeddings_note=note,
        )

    def content_key(self) -> dict[str, Any]:
        """The manifest as a dict without provenance fields, for change detection."""
        data = self.to_dict()
        for name in _PROVENANCE_FIELDS:
            data.pop(name, None)
        return data

    def same_content(self, other: PublishManifest) -> bool:
        """True when both describe the same artifacts and figures (time and run aside)."""
        return self.content_key() == other.content_key()

    def or_earlier(self, earlier: Iterable[PublishManifest | None]) -> PublishManifest:
        """The first earlier manifest with this content, else this one: a re-publish of
        the same bytes keeps the manifest live (its timestamp says when they went live)."""
        return next((m for m in earlier if m is not None and m.same_content(self)), self)

    # -- JSON ------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        # Round-trip through JSON so the dict compares equal to one read back from disk
        # (tuples become lists, keys become strings).
        return dict(json.loads(json.dumps(asdict(self))))

    def to_json(self, objects: Mapping[str, Any] | None = None) -> bytes:
        """Stable bytes: sorted keys, two-space indent, trailing newline. `objects`: the
        section the S3 copy adds, naming the keys it vouches for (`publishing.s3`)."""
        data = self.to_dict() if objects is None else {**self.to_dict(), "objects": objects}
        text = json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False)
        return (text + "\n").encode("utf-8")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PublishManifest:
        def artifact(value: Any) -> ArtifactInfo | None:
            if value is None:
                return None
            return ArtifactInfo(str(value["filename"]), int(value["size"]), str(value["sha256"]))

        store = artifact(data["store"])
        if store is None:
            raise ValueError("manifest has no store entry")
        return cls(
            store=store,
            chunk_count=int(data["chunk_count"]),
            chunks_per_area={str(k): int(v) for k, v in dict(data["chunks_per_area"]).items()},
            embeddings=artifact(data.get("embeddings")),
            embedding_model=data.get("embedding_model"),
            embedding_dimension=data.get("embedding_dimension"),
            vectors_count=int(data.get("vectors_count", 0)),
            vector_coverage=float(data.get("vector_coverage", 0.0)),
            embeddings_note=data.get("embeddings_note"),
            evaluation=dict(data.get("evaluation") or {}),
            # Manifests published before the rename call it corpus_fingerprint.
            corpus_digest=data.get("corpus_digest", data.get("corpus_fingerprint")),
            run_id=data.get("run_id"),
            published_at=str(data.get("published_at", "")),
            format=int(data.get("format", MANIFEST_FORMAT)),
        )

    @classmethod
    def from_json(cls, data: bytes | str) -> PublishManifest:
        """Parse manifest.json; raises ValueError (incl. JSONDecodeError) when unreadable."""
        parsed = json.loads(data)
        if not isinstance(parsed, dict):
            raise ValueError("manifest.json must hold a JSON object")
        try:
            return cls.from_dict(parsed)
        except (KeyError, TypeError) as exc:
            raise ValueError(f"manifest.json is missing or mistypes a field: {exc}") from exc

    # -- presentation ----------------------------------------------------------------

    def to_markdown(self) -> str:
        """A short Markdown summary for the Dagster UI (asset metadata)."""
        lines = [
            f"**Published** {self.published_at or 'n/a'}"
            + (f" (run `{self.run_id}`)" if self.run_id else ""),
            "",
            f"**Chunks** {self.chunk_count}",
            "",
            "| area | chunks |",
            "|---|---:|",
        ]
        # area names are folder names of the corpus: literal text, not Markdown
        areas = sorted(self.chunks_per_area.items())
        lines += [f"| {md_text(area)} | {n} |" for area, n in areas]
        lines.append("")
        if self.embeddings is not None:
            lines.append(
                f"**Vectors** {md_code(self.embedding_model)} × {self.embedding_dimension}, "
                f"{self.vectors_count} vectors, coverage {self.vector_coverage:.1%}"
            )
        else:
            lines.append(f"**Vectors** none ({md_text(self.embeddings_note or 'not published')})")
        if self.evaluation:
            lines += ["", "| evaluation | value |", "|---|---:|"]
            lines += [f"| {k} | {_fmt(v)} |" for k, v in sorted(_flatten(self.evaluation).items())]
        lines += ["", "| file | bytes | sha256 |", "|---|---:|---|"]
        lines += [f"| {a.filename} | {a.size} | `{a.sha256}` |" for a in self.artifacts()]
        if self.corpus_digest:
            lines += ["", f"**Corpus digest** `{self.corpus_digest}`"]
        return "\n".join(lines) + "\n"


def _flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """{"bm25": {"ndcg@10": 0.7}} -> {"bm25.ndcg@10": 0.7}, for one table row per figure."""
    flat: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(_flatten(value, name + "."))
        else:
            flat[name] = value
    return flat


def _fmt(value: Any) -> str:
    return f"{value:.4f}" if isinstance(value, float) else str(value)


def utc_now_iso() -> str:
    """Seconds-resolution UTC timestamp, e.g. 2026-01-31T12:00:00Z."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def build_manifest(
    store: ArtifactSource,
    embeddings: ArtifactSource | None,
    chunks: Sequence[Chunk] | None = None,
    evaluation: Mapping[str, Any] | None = None,
    corpus_digest: str | None = None,
    run_id: str | None = None,
    *,
    published_at: str | None = None,
    counts: tuple[Mapping[str, int], Sequence[str]] | None = None,
) -> PublishManifest:
    """Describe a publication of these files, without reading them whole.

    Digests and sizes are the sources' known ones; the embeddings' model, dimension and
    ids come from their header, read through a memory map (the vectors are not read).
    `chunks` saves parsing the store when the caller already holds them; they must be
    the chunks `store` encodes. `counts` (chunks per area, live ids) saves even that: a
    store view knows both without decoding a chunk, and is what a large publish passes
    (without either, the store is read and parsed). Embeddings that are not a PATBEMB1
    file are described as absent, with a note, never misread.
    """
    if counts is not None:
        per_area, live_ids = counts
    else:
        if chunks is None:
            chunks = parse_store(store.path.read_bytes())
        per_area = Counter(chunk.area for chunk in chunks)
        live_ids = [chunk.id for chunk in chunks]
    manifest = PublishManifest(
        store=ArtifactInfo.of_source(STORE_FILENAME, store),
        chunk_count=sum(per_area.values()),
        chunks_per_area=dict(sorted(per_area.items())),
        evaluation=dict(evaluation or {}),
        corpus_digest=corpus_digest,
        run_id=run_id,
        published_at=published_at or utc_now_iso(),
    )
    if embeddings is None:
        return manifest.without_embeddings("no embeddings were built")
    try:
        vectors = read_vectors_header(embeddings)
    except NotAnEmbeddingStore as exc:
        return manifest.without_embeddings(f"embeddings.bin is unreadable: {exc}")
    store_ids = set(live_ids)
    covered = len(store_ids.intersection(vectors.ids))
    return replace(
        manifest,
        embeddings=ArtifactInfo.of_source(EMBEDDINGS_FILENAME, embeddings),
        embedding_model=vectors.model,
        embedding_dimension=vectors.dim,
        vectors_count=vectors.count,
        vector_coverage=round(covered / len(store_ids), 6) if store_ids else 0.0,
    )


@dataclass(frozen=True)
class CorpusComparison:
    """Whether the corpus on disk is the one a manifest was built from.

    `state` is "unchanged", "changed" or "unknown" (no recorded digest, or the
    corpus cannot be read; `detail` says which).
    """

    state: str
    current: str | None = None
    detail: str = ""


def compare_corpus(
    recorded: str | None,
    corpus_root: Path | None,
    build_dir: Path | None = None,
    limits: Any = None,
) -> CorpusComparison:
    """Compare a manifest's corpus digest with a fresh one of `corpus_root`."""
    if recorded is None:
        return CorpusComparison("unknown", detail="the manifest records no corpus digest")
    if corpus_root is None:
        return CorpusComparison("unknown", detail="no corpus configured")
    try:
        current = corpus_digest(corpus_root, build_dir, limits)
    except OSError as exc:
        return CorpusComparison("unknown", detail=f"cannot read the corpus: {exc}")
    state = "unchanged" if current == recorded else "changed"
    return CorpusComparison(state, current, str(corpus_root))
