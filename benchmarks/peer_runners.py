"""One incremental indexing run of a peer framework, in this process (bench_peers.py runs
it as a fresh process per measurement).

Each peer does the task the way its own documentation recommends for keeping an index
in sync with a folder, with a fake embedder (a fixed-size vector from the chunk's hash,
no model) and the same paragraph chunking as ours (split on blank lines), so every
side indexes the same ~16 chunks per file:

* cocoindex    an App whose per-file component is memoised (`@coco.fn(memo=True)`),
               mounted with `mount_each` over `localfs.walk_dir`; state in its LMDB
               database; one JSON file of chunks + vectors per source file declared
               as a target state (`localfs` dir target).
* llamaindex   `IngestionPipeline` with a `SimpleDocumentStore` docstore and
               `DocstoreStrategy.UPSERTS_AND_DELETE` plus a `SimpleVectorStore`,
               persisted with `pipeline.persist()` / `pipeline.load()` (the vector store with
               its own `persist()`); documents from `SimpleDirectoryReader(filename_as_id=
               True)`; a paragraph `NodeParser`; no transformation cache.
* langchain    `index()` with cleanup `scoped_full`, `source_id_key="source"`, an
               `InMemoryRecordManager` and an `InMemoryVectorStore`, both saved to the
               state folder after the run and loaded before it (a fresh process has
               no memory of the last run otherwise).

Usage: python benchmarks/peer_runners.py PEER CORPUS STATE
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import sys
from pathlib import Path

DIMENSION = 8


def paragraphs(text: str) -> list[str]:
    return [p.strip() for p in text.split("\n\n") if p.strip()]


def fake_vector(text: str) -> list[float]:
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return [b / 255.0 for b in digest[:DIMENSION]]


def run_cocoindex(corpus: Path, state: Path) -> None:
    import cocoindex as coco
    from cocoindex.connectors import localfs
    from cocoindex.resources.file import PatternFilePathMatcher

    out = state / "out"

    @coco.fn(memo=True)
    async def process_file(file: localfs.File, target: localfs.DirTarget) -> None:
        text = await file.read_text()
        rows = [
            {"id": hashlib.sha256(p.encode()).hexdigest()[:12], "text": p, "vector": fake_vector(p)}
            for p in paragraphs(text)
        ]
        name = file.file_path.path.as_posix().replace("/", "__") + ".json"
        target.declare_file(name, json.dumps(rows))

    @coco.fn
    async def app_main(source: Path, output: Path) -> None:
        target = await localfs.mount_dir_target(output)
        files = localfs.walk_dir(
            source, recursive=True, path_matcher=PatternFilePathMatcher(["**/*.md"])
        )
        await coco.mount_each(process_file, files.items(), target)

    env = coco.Environment(coco.Settings(db_path=state / "cocoindex.db"))
    app = coco.App(coco.AppConfig(name="bench_peer", environment=env), app_main, corpus, out)
    app.update_blocking()


def run_llamaindex(corpus: Path, state: Path) -> None:
    from llama_index.core import SimpleDirectoryReader
    from llama_index.core.embeddings import MockEmbedding
    from llama_index.core.ingestion import DocstoreStrategy, IngestionPipeline
    from llama_index.core.node_parser import NodeParser
    from llama_index.core.node_parser.node_utils import build_nodes_from_splits
    from llama_index.core.storage.docstore import SimpleDocumentStore
    from llama_index.core.vector_stores import SimpleVectorStore

    class ParagraphParser(NodeParser):
        """Paragraphs as nodes, like ours (a node parser is LlamaIndex's extension point)."""

        def _parse_nodes(self, nodes, show_progress=False, **kwargs):  # type: ignore[no-untyped-def]
            out = []
            for node in nodes:
                out.extend(build_nodes_from_splits(paragraphs(node.get_content()), node))
            return out

    documents = SimpleDirectoryReader(
        str(corpus), recursive=True, required_exts=[".md"], filename_as_id=True
    ).load_data()
    persist = state / "pipeline"
    vectors_file = persist / "vectors.json"
    vectors = (
        SimpleVectorStore.from_persist_path(str(vectors_file))
        if vectors_file.exists()
        else SimpleVectorStore()
    )
    pipeline = IngestionPipeline(
        transformations=[ParagraphParser(), MockEmbedding(embed_dim=DIMENSION)],
        docstore=SimpleDocumentStore(),
        vector_store=vectors,
        docstore_strategy=DocstoreStrategy.UPSERTS_AND_DELETE,
        disable_cache=True,
    )
    if persist.exists():
        pipeline.load(str(persist))
    pipeline.run(documents=documents)
    pipeline.persist(str(persist))
    vectors.persist(str(vectors_file))


def run_langchain(corpus: Path, state: Path) -> None:
    from langchain_core.documents import Document
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_core.indexing import InMemoryRecordManager, index
    from langchain_core.vectorstores import InMemoryVectorStore

    embedding = DeterministicFakeEmbedding(size=DIMENSION)
    records_file, store_file = state / "records.pickle", state / "vectors.json"
    manager = InMemoryRecordManager(namespace="bench_peer")
    if records_file.exists():
        manager.records = pickle.loads(records_file.read_bytes())
    store = (
        InMemoryVectorStore.load(str(store_file), embedding)
        if store_file.exists()
        else InMemoryVectorStore(embedding)
    )

    def documents():  # a loader: one Document per paragraph, its file as the source
        for folder, _dirs, names in os.walk(corpus):
            for name in sorted(names):
                if name.endswith(".md"):
                    path = os.path.join(folder, name)
                    with open(path, encoding="utf-8") as handle:
                        for paragraph in paragraphs(handle.read()):
                            yield Document(page_content=paragraph, metadata={"source": path})

    index(
        documents(),
        manager,
        store,
        cleanup="scoped_full",
        source_id_key="source",
        key_encoder="sha256",
    )
    state.mkdir(parents=True, exist_ok=True)
    records_file.write_bytes(pickle.dumps(manager.records))
    store.dump(str(store_file))


RUNNERS = {"cocoindex": run_cocoindex, "llamaindex": run_llamaindex, "langchain": run_langchain}

if __name__ == "__main__":
    peer, corpus_arg, state_arg = sys.argv[1:4]
    state_dir = Path(state_arg)
    state_dir.mkdir(parents=True, exist_ok=True)
    RUNNERS[peer](Path(corpus_arg), state_dir)
