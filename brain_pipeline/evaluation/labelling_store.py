"""The store the fixture tools read: the build directory's, brought up to date first.

Why refresh at all: a new user labels before any `materialize` (the pipeline will not
publish without a fixture, so the fixture tools must not need a build), and after an
area folder is renamed `fixture check` has to see what the next run will see, or the
check and the blocking evaluation would disagree and send the user in circles.

Why this is not a second ingest: the refresh is the pipeline's own steps, in order,
on the build directory's own caches: `observe_corpus` (the file index re-hashes only
changed files), `chunk_snapshot` (the per-file chunk cache), `assemble_store` (the
byte-identical store, rewritten only when its bytes change) and `remember_store` (the
chunk history, so an edited label's old text stays known). The next `materialize` finds
all of it current. No embeddings are made: the tools rank lexically when the store's
vectors are missing or were made for another store.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from brain_pipeline.config import BrainConfig, CorpusNotFoundError
from brain_pipeline.state.layout import StateLayout

BUILT = "built"
UPDATED = "updated"
CURRENT = "current"
AS_IS = "as is"


class StoreRefreshError(RuntimeError):
    """No store can be shown: none is built and it cannot be built now (message says why)."""


@dataclass(frozen=True)
class StoreRefresh:
    """Which store file the tools read and whether it was (re)built from the corpus."""

    store_file: Path
    status: str
    """BUILT (there was none), UPDATED, CURRENT, or AS_IS (not refreshed: see `note`)."""
    note: str | None = None


def refresh_build_store(
    cfg: BrainConfig,
    seed_store: Path | None = None,
    *,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> StoreRefresh:
    """Bring `cfg.build_dir`'s knowledge-store.json up to date with the corpus.

    Without a corpus, an existing store is used as built; while another process holds
    the build directory (a run), too, rather than waiting for it. Raises
    StoreRefreshError when there is neither a store nor a way to build one now.
    `seed_store` (the live published store) seeds an empty chunk history.
    """
    from brain_pipeline.corpus.assembly import assemble_store
    from brain_pipeline.corpus.chunk_cache import CorpusChangedError, chunk_snapshot
    from brain_pipeline.corpus.history import is_empty, remember_store
    from brain_pipeline.corpus.ingest import ingest_file
    from brain_pipeline.corpus.observation import observe_corpus
    from brain_pipeline.state.lock import LockBusyError, build_dir_lock, make_holder

    layout = StateLayout.of(cfg.build_dir)
    existed = layout.store_file.is_file()
    try:
        root = cfg.corpus_root()
    except CorpusNotFoundError as exc:
        if existed:
            return StoreRefresh(
                layout.store_file, AS_IS, "no corpus found: using the store as built"
            )
        first = str(exc).splitlines()[0]
        raise StoreRefreshError(
            f"no store in {layout.build_dir} and no corpus to build one ({first}); set "
            f"corpus.path in {cfg.config_path or 'corpus_config.yaml'} or CURATED_CONTENT_PATH"
        ) from exc
    limits = cfg.ingest_limits()
    try:
        with build_dir_lock(
            layout.build_dir, wait_seconds=0, holder=make_holder("brain-pipeline fixture")
        ):
            snapshot = observe_corpus(root, layout, limits=limits)
            chunk_snapshot(
                snapshot,
                layout,
                variant=limits.cache_variant,
                chunker=functools.partial(ingest_file, limits=limits),
            )
            report = assemble_store(
                snapshot, layout, layout.store_file, variant=limits.cache_variant
            )
            if report.written or is_empty(layout):
                remember_store(
                    layout, layout.store_file, now(), seed_store=seed_store, sha256=report.sha256
                )
    except LockBusyError as exc:
        if existed:
            return StoreRefresh(
                layout.store_file,
                AS_IS,
                "another process is building the build directory: showing the store as it "
                "was last built",
            )
        raise StoreRefreshError(f"{exc}; run this command again when it ends") from exc
    except CorpusChangedError as exc:
        raise StoreRefreshError(f"{exc}; run this command again") from exc
    status = CURRENT if not report.written else UPDATED if existed else BUILT
    return StoreRefresh(layout.store_file, status)
