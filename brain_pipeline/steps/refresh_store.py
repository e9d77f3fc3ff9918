"""The store the fixture tools read: the build directory's, brought up to date first.

Why refresh at all: a new user labels before any `materialize` (the pipeline will not
publish without a fixture, so the fixture tools must not need a build), and after an
area folder is renamed `fixture check` has to see what the next run will see, or the
check and the blocking evaluation would disagree and send the user in circles.

Why this is not a second ingest: the refresh runs the pipeline's own ingest steps
(`steps.ingest`: observe, chunk through the per-file cache, assemble the byte-identical
store and remember its chunks in the history), records included, so the next
`materialize` finds all of it current. No embeddings are made: the tools rank lexically
when the store's vectors are missing or were made for another store.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from brain_pipeline.config import BrainConfig, CorpusNotFoundError
from brain_pipeline.steps.contract import StepFailure

BUILT = "built"
UPDATED = "updated"
CURRENT = "current"
AS_IS = "as is"


RUN_ID = "brain-pipeline fixture"
"""What the refreshed records name as their run: no Dagster run made them."""


class _Quiet:
    """The steps' log, unheard: problem files are the pipeline run's to report."""

    def info(self, msg: str) -> None:
        return None

    def warning(self, msg: str) -> None:
        return None


_QUIET = _Quiet()


class StoreRefreshError(RuntimeError):
    """No store can be shown: none is built and it cannot be built now (message says why)."""


@dataclass(frozen=True)
class StoreRefresh:
    """Which store file the tools read and whether it was (re)built from the corpus."""

    store_file: Path
    status: str
    """BUILT (there was none), UPDATED, CURRENT, or AS_IS (not refreshed: see `note`)."""
    note: str | None = None


def refresh_build_store(cfg: BrainConfig) -> StoreRefresh:
    """Bring `cfg.build_dir`'s knowledge-store.json up to date with the corpus.

    Without a corpus, an existing store is used as built; while another process holds
    the build directory (a run), too, rather than waiting for it. Raises
    StoreRefreshError when there is neither a store nor a way to build one now.
    An empty chunk history is seeded from the live published store, as a run seeds it.
    """
    from brain_pipeline.config import memory_of
    from brain_pipeline.corpus.chunk_cache import CorpusChangedError
    from brain_pipeline.state.lock import LockBusyError, make_holder
    from brain_pipeline.state.run_lease import run_lease
    from brain_pipeline.steps.ingest import assemble_knowledge_store, chunk_corpus, observe

    layout = cfg.layout
    existed = layout.store_file.is_file()
    try:
        cfg.corpus_root()  # where the corpus is, or why there is none
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
    try:
        with run_lease(
            memory_of(cfg).ledger,
            run_id=None,
            wait_seconds=0,
            holder=make_holder("brain-pipeline fixture"),
        ):
            snapshot = observe(cfg)
            chunks = chunk_corpus(cfg, snapshot, run_id=RUN_ID, log=_QUIET).record
            assert chunks is not None  # chunk_corpus always keeps its record
            result = assemble_knowledge_store(cfg, chunks, run_id=RUN_ID, log=_QUIET)
    except LockBusyError as exc:
        if existed:
            return StoreRefresh(
                layout.store_file,
                AS_IS,
                "another process is building the build directory: showing the store as it "
                "was last built",
            )
        raise StoreRefreshError(f"{exc}; run this command again when it ends") from exc
    except (CorpusChangedError, StepFailure) as exc:
        raise StoreRefreshError(f"{exc}; run this command again") from exc
    written = result.metadata.get("status") == "written"
    status = CURRENT if not written else UPDATED if existed else BUILT
    return StoreRefresh(layout.store_file, status)
