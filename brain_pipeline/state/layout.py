"""The one layout of a build directory: every path the pipeline keeps between runs.

```
<build dir>/
  knowledge-store.json  embeddings.bin     the artifacts (the agent's contract)
  state/
    files.json, snapshots/  before the ledger: the corpus file index and snapshots (read
                       into the ledger and blobs once: corpus.observation)
    chunks/            per-file chunk cache keyed by file sha256 + chunking version
    store/             sidecar index of knowledge-store.json (offsets, ids, areas)
    index/             BM25 postings (the per-chunk term counts), area versions (masks)
    history/           live-ids.npz, the latest store's live ids (a cache of the chunk
                       history, which is in the ledger); before it, chunks.sqlite (read in once)
    assets/            (before the ledger) one record per asset: read into the ledger once
    embedding-gaps.json before the ledger: refused, skipped or truncated chunks (read in once)
    eval-digests.json  stat-keyed memo of the files an evaluation hashes (a local cache;
                       outcomes, verdicts and baselines are in the ledger: evaluation.judgements)
    locks/             one writer per build directory (OS locks, holder described)
    publications.json  before the ledger: the publication history (read in once)
    published/         fetched copies of kept publications' blobs, for a rollback (a
                       cache; before the ledger: objects/, the archive, read in once)
    ledger.sqlite      the ledger (state.ledger's default): asset records, verdicts,
                       baselines, vector packs, gaps, ...
    blobs/             content-addressed blobs (state.blobs's default): their contents
```

Paths are only named here; each module that owns a file creates it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

STATE_DIRNAME = "state"


@dataclass(frozen=True)
class StateLayout:
    """Paths inside one build directory."""

    build_dir: Path

    @classmethod
    def of(cls, build_dir: Path | str) -> StateLayout:
        return cls(Path(build_dir).expanduser().resolve())

    @property
    def state_dir(self) -> Path:
        return self.build_dir / STATE_DIRNAME

    @property
    def store_file(self) -> Path:
        return self.build_dir / "knowledge-store.json"

    @property
    def embeddings_file(self) -> Path:
        return self.build_dir / "embeddings.bin"

    @property
    def files_index(self) -> Path:
        return self.state_dir / "files.json"

    @property
    def snapshots_dir(self) -> Path:
        return self.state_dir / "snapshots"

    @property
    def chunks_dir(self) -> Path:
        return self.state_dir / "chunks"

    @property
    def store_index_dir(self) -> Path:
        return self.state_dir / "store"

    @property
    def bm25_dir(self) -> Path:
        return self.state_dir / "index"

    @property
    def embedding_gaps(self) -> Path:
        """Before the ledger: refused, skipped or truncated chunks (read in once)."""
        return self.state_dir / "embedding-gaps.json"

    @property
    def history_dir(self) -> Path:
        return self.state_dir / "history"

    @property
    def assets_dir(self) -> Path:
        return self.state_dir / "assets"

    @property
    def locks_dir(self) -> Path:
        return self.state_dir / "locks"

    @property
    def publications_record(self) -> Path:
        return self.state_dir / "publications.json"

    @property
    def published_archive(self) -> Path:
        return self.state_dir / "published"

    @property
    def ledger(self) -> Path:
        """The SQLite ledger when `state.ledger` is unset (`state.ledger`)."""
        return self.state_dir / "ledger.sqlite"

    @property
    def blobs_dir(self) -> Path:
        """The blob folder when `state.blobs` is unset (`state.blobs`)."""
        return self.state_dir / "blobs"
