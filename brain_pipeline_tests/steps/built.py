"""A built (and evaluated) project for the evaluate and publish steps, with plain values.

The store is made by the pure ingest steps and the embeddings step with provider `none`
(so BM25 is the agent's retriever), the fixture from the chunk ids the store really holds.
No Dagster anywhere: the steps are called as functions.
"""

from __future__ import annotations

import json
from typing import Any

import yaml

from brain_pipeline.config import load_config
from brain_pipeline.corpus.store_reader import open_store_view
from brain_pipeline.evaluation import eval_record
from brain_pipeline.evaluation.service import evaluation_inputs, judgement_memory
from brain_pipeline.evaluation.verdict import EvaluationVerdict
from brain_pipeline.steps.embed import embed_store
from brain_pipeline.steps.health import fits_agent_string_limit, record_blocking_verdict
from brain_pipeline.steps.ingest import assemble_knowledge_store, chunk_corpus, observe
from brain_pipeline_tests.steps.conftest import Project, StepLog
from brain_pipeline_tests.steps.handed import chunks_of, store_of

ANSWERED = "paragraph chunk store"
"""A query whose words are all in the aws chunk: BM25 ranks it first."""
UNANSWERABLE = "zebra quokka"
"""A query sharing no word with the python chunk: BM25 misses it."""


def configure(project: Project, **sections: Any) -> Project:
    """The project with its configuration rewritten: the fixture's paths plus `sections`
    (e.g. `evaluation={"thresholds": ...}`, `publish={"s3": ...}`), loaded afresh."""
    root = project.root
    data: dict[str, Any] = {
        "corpus": {"path": str(root / "corpus"), "candidates": []},
        "build_dir": str(root / "build"),
        "embedding": {"provider": "none"},
        "evaluation": {"fixture": str(root / "fixture.json")},
        "publish": {"root": str(root / "agent")},
    }
    for name, values in sections.items():
        data[name] = {**data.get(name, {}), **values}
    path = root / "corpus_config.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return Project(root, load_config(path, env={}))


def build(project: Project, log: StepLog) -> None:
    """Observe, chunk, assemble (and judge the store's size, as the store's step does)
    and (not) embed: the build directory the steps read."""
    chunk_corpus(project.cfg, observe(project.cfg), run_id="r", log=log)
    assemble_knowledge_store(project.cfg, chunks_of(project.cfg), run_id="r", log=log)
    judged = fits_agent_string_limit(project.cfg)
    record_blocking_verdict(project.cfg, "fits_agent_string_limit", judged, "r")
    embed_store(
        project.cfg, store_of(project.cfg), make_embedder=lambda _cfg: None, run_id="r", log=log
    )


def chunk_ids(project: Project) -> dict[str, str]:
    """Area -> the id of its first chunk in the built store."""
    ids: dict[str, str] = {}
    for chunk in open_store_view(project.layout.store_file, project.layout).all_chunks():
        ids.setdefault(chunk.area, chunk.id)
    return ids


def write_fixture(project: Project, *, miss: bool = False) -> None:
    """Label the aws chunk for ANSWERED, and the python chunk for a query BM25 finds
    (or, with `miss`, for UNANSWERABLE)."""
    ids = chunk_ids(project)
    queries = [
        {"query": ANSWERED, "area": "aws", "relevant": [ids["aws"]]},
        {
            "query": UNANSWERABLE if miss else "items in order",
            "area": "python",
            "relevant": [ids["python"]],
        },
    ]
    (project.root / "fixture.json").write_text(json.dumps({"queries": queries}), "utf-8")


def bury_the_answer(project: Project) -> None:
    """Twelve paragraphs in area aws that out-score ANSWERED's answer: a new miss."""
    path = project.root / "corpus" / "aws" / "vpc.md"
    lines = [f"Store the chunk; chunk the store, paragraph {i}." for i in range(12)]
    path.write_text(path.read_text("utf-8") + "\n" + "\n\n".join(lines) + "\n", "utf-8")


def record_of_build(project: Project) -> dict[str, Any] | None:
    """The evaluation record for exactly the build's current inputs (None: none kept)."""
    inputs = evaluation_inputs(project.cfg, project.cfg.build_dir)
    assert inputs is not None
    return eval_record.lookup(judgement_memory(project.cfg), inputs.key())


def stored_verdict_of_build(project: Project) -> EvaluationVerdict:
    record = record_of_build(project)
    assert record is not None and record.get("verdict") is not None
    return EvaluationVerdict.from_dict(record["verdict"])


def plant_verdict(project: Project, verdict: EvaluationVerdict | None) -> None:
    """Replace the verdict kept for the build's inputs (None: drop it, as a record
    written before verdicts were stored), keeping the rest of the record."""
    record = record_of_build(project)
    assert record is not None, "evaluate the build first"
    kept = {k: v for k, v in record.items() if k not in ("key", "verdict")}
    if verdict is not None:
        kept["verdict"] = verdict.to_dict()
    key = str(record["key"])
    eval_record.save(judgement_memory(project.cfg), key, kept)
