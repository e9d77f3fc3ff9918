"""The README on metadata: figures are numbers the UI can plot, and tables carry a schema
and `dagster/row_count`. Read back from the instance after a real run."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from brain_pipeline.corpus.store import parse_store
from brain_pipeline_tests.defs.conftest import make_project, tiny_fixture, write_tiny_corpus

COUNTED = ("knowledge_chunks", "knowledge_store", "published_local")


def test_row_counts_are_the_chunks_and_every_table_has_a_schema(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    project = make_project(tmp_path, corpus, tiny_fixture(write_tiny_corpus(corpus)))
    assert project.materialize().success
    chunks = len(parse_store(project.store_file.read_bytes()))
    assert chunks > 0
    instance = project.instance
    metadata_sets = []
    for name in COUNTED:
        event = instance.get_latest_materialization_event(dg.AssetKey(name))
        assert event is not None and event.asset_materialization is not None, name
        metadata = event.asset_materialization.metadata
        # The tiny corpus has no duplicate paragraph: occurrences == stored chunks.
        assert metadata["dagster/row_count"] == dg.IntMetadataValue(chunks), name
        metadata_sets.append(metadata)
    record = instance.get_latest_asset_check_evaluation_record(
        dg.AssetCheckKey(dg.AssetKey("embeddings"), "retrieval_eval")
    )
    assert record is not None and record.event is not None
    evaluation = record.event.dagster_event.event_specific_data  # type: ignore[union-attr]
    metadata_sets.append(evaluation.metadata)  # type: ignore[union-attr]
    tables = [
        value
        for metadata in metadata_sets
        for value in metadata.values()
        if isinstance(value, dg.TableMetadataValue)
    ]
    assert tables, "no table metadata at all"
    for table in tables:
        assert table.schema is not None and table.schema.columns
        names = {column.name for column in table.schema.columns}
        assert all(set(record.data) <= names for record in table.records)
    # The check's bounds are a table too, and the embeddings say which provider ran.
    assert isinstance(evaluation.metadata["thresholds"], dg.TableMetadataValue)  # type: ignore[union-attr]
    embedded = instance.get_latest_materialization_event(dg.AssetKey("embeddings"))
    assert embedded is not None and embedded.asset_materialization is not None
    assert embedded.asset_materialization.metadata["provider_used"] == dg.TextMetadataValue("none")
    # A figure is a number, not text: the check's nDCG@10 can be plotted.
    figures = [v for k, v in evaluation.metadata.items() if "ndcg" in k.lower()]  # type: ignore[union-attr]
    assert figures and all(
        isinstance(v, dg.FloatMetadataValue | dg.IntMetadataValue) for v in figures
    ), figures
