"""The one layout of a build directory: every path the pipeline keeps between runs.

```
<build dir>/
  knowledge-store.json  embeddings.bin     the artifacts (the agent's contract)
  state/
    files.*            corpus file index: path -> size, mtime_ns, sha256 (re-hash on change)
    snapshots/         one corpus snapshot per digest (what an observation saw)
    chunks/            per-file chunk cache keyed by file sha256 + chunking version
    store/             sidecar index of knowledge-store.json (offsets, ids, areas)
    index/             BM25 postings, area versions (masks over postings), token counts
    history/           every chunk id ever written to a store (fixture repair)
    assets/            one record per asset: inputs' digests -> outputs' digests
    embedding-gaps.json chunks refused by the embedding service, skipped or truncated
    eval.json          the last evaluation keyed by its input digests (publish gate)
    check-verdicts.json the other blocking checks' verdicts, keyed by what they judged
    eval-baseline.json the evaluation of the last published (or accepted) store, and a
                       summary of every publication's (regression gate, eval --history)
    locks/             one writer per build directory (OS locks, holder described)
    publications.json  before the ledger: the publication history (read in once)
    published/         fetched copies of kept publications' blobs, for a rollback (a
                       cache; before the ledger: objects/, the archive, read in once)
    ledger.sqlite      the ledger (state.ledger's default; issue 41, not used by steps yet)
    blobs/             content-addressed blobs (state.blobs's default; likewise)
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
        """Chunks refused by the embedding service, skipped or truncated (`embedding.gaps`)."""
        return self.state_dir / "embedding-gaps.json"

    @property
    def history_dir(self) -> Path:
        return self.state_dir / "history"

    @property
    def assets_dir(self) -> Path:
        return self.state_dir / "assets"

    @property
    def eval_record(self) -> Path:
        return self.state_dir / "eval.json"

    @property
    def check_verdicts(self) -> Path:
        """Blocking checks' verdicts keyed by the data they judged (`state.check_verdicts`)."""
        return self.state_dir / "check-verdicts.json"

    @property
    def eval_baseline(self) -> Path:
        return self.state_dir / "eval-baseline.json"

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
