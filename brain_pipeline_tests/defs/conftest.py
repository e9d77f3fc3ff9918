"""A throw-away project for materialising the real Definitions in-process."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import yaml

from brain_pipeline.corpus.store import chunk_id
from brain_pipeline.definitions import build_definitions
from brain_pipeline.lib.runner import MaterializeOutcome, materialize_selection

REPO = Path(__file__).resolve().parents[2]
SAMPLE_CORPUS = REPO / "examples" / "curated-content"
SAMPLE_FIXTURE = REPO / "examples" / "retrieval-eval.json"

# A tiny corpus whose chunk ids the tests compute themselves from the paragraph text.
TINY_PARAGRAPHS = {
    "alpha/notes.md": [
        "# Alpha notes",
        "Security groups are stateful firewalls attached to network interfaces.",
        "Network ACLs are stateless and evaluate numbered rules in order.",
    ],
    "beta/guide.md": [
        "## Beta guide",
        "Gliders are small patterns that travel diagonally across the grid.",
        "Still lifes never change from one generation to the next.",
    ],
}


def write_tiny_corpus(root: Path) -> dict[str, str]:
    """Write TINY_PARAGRAPHS; return paragraph text -> expected chunk id."""
    ids = {}
    for rel, paragraphs in TINY_PARAGRAPHS.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n\n".join(paragraphs) + "\n", encoding="utf-8")
        ids.update({p: chunk_id(p) for p in paragraphs})
    return ids


def tiny_fixture(ids: dict[str, str]) -> dict[str, Any]:
    def ref(text: str) -> str:
        return ids[text]

    return {
        "$comment": ["tiny fixture for the Dagster tests"],
        "queries": [
            {
                "query": "stateful firewall security groups",
                "area": "alpha",
                "relevant": [ref(TINY_PARAGRAPHS["alpha/notes.md"][1])],
            },
            {
                "query": "patterns that travel diagonally",
                "area": "beta",
                "relevant": [ref(TINY_PARAGRAPHS["beta/guide.md"][1])],
            },
            {
                # Shares no word with its answer: BM25 misses it, so nDCG@10 < 1.
                "query": "unchanging shapes",
                "area": "beta",
                "relevant": [ref(TINY_PARAGRAPHS["beta/guide.md"][2])],
            },
        ],
    }


@dataclass
class Project:
    """Paths of one test project and a way to run its graph."""

    root: Path
    corpus: Path
    build: Path
    publish_root: Path
    config_path: Path
    settings: dict[str, Any]
    instance: dg.DagsterInstance
    outcomes: list[MaterializeOutcome] = field(default_factory=list)

    def write_config(self, **overrides: Any) -> None:
        merged = json.loads(json.dumps(self.settings))
        for dotted, value in overrides.items():
            node = merged
            *parents, leaf = dotted.split(".")
            for part in parents:
                node = node.setdefault(part, {})
            node[leaf] = value
        self.config_path.write_text(yaml.safe_dump(merged), encoding="utf-8")

    def materialize(self, selection: str = "*", **kwargs: Any) -> MaterializeOutcome:
        defs = build_definitions(str(self.config_path))
        outcome = materialize_selection(
            selection, definitions=defs, instance=self.instance, **kwargs
        )
        self.outcomes.append(outcome)
        return outcome

    @property
    def store_file(self) -> Path:
        return self.build / "knowledge-store.json"

    def published(self, kind: str = "src") -> Path:
        return self.publish_root / kind / "storage"


def make_project(tmp_path: Path, corpus: Path, fixture: Path | dict[str, Any]) -> Project:
    if isinstance(fixture, dict):
        fixture_path = tmp_path / "fixture.json"
        fixture_path.write_text(json.dumps(fixture), encoding="utf-8")
    else:
        fixture_path = fixture
    settings: dict[str, Any] = {
        "corpus": {"path": str(corpus), "candidates": []},
        "build_dir": str(tmp_path / "build"),
        "embedding": {"provider": "none"},
        "evaluation": {
            "fixture": str(fixture_path),
            "thresholds": {"bm25": {"min_ndcg_at_10": 0.2, "max_misses": 100}},
        },
        "publish": {"root": str(tmp_path / "agent")},
    }
    project = Project(
        root=tmp_path,
        corpus=corpus,
        build=tmp_path / "build",
        publish_root=tmp_path / "agent",
        config_path=tmp_path / "corpus_config.yaml",
        settings=settings,
        instance=dg.DagsterInstance.ephemeral(),
    )
    project.write_config()
    return project


IMPOSSIBLE = {"evaluation.thresholds": {"bm25": {"min_ndcg_at_10": 1.0, "max_misses": 0}}}
"""Thresholds no build meets: the blocking evaluation fails and nothing is published."""


def make_tiny_project(tmp_path: Path) -> Project:
    """The tiny corpus and its fixture, as a project under `tmp_path`."""
    corpus = tmp_path / "corpus"
    return make_project(tmp_path, corpus, tiny_fixture(write_tiny_corpus(corpus)))


def cli_sees(project: Project, monkeypatch: pytest.MonkeyPatch) -> Project:
    """Point the command line at `project` (its config, its own Dagster home)."""
    monkeypatch.setenv("BRAIN_CONFIG", str(project.config_path))
    monkeypatch.setenv("DAGSTER_HOME", str(project.root / "dagster-home"))
    return project


@pytest.fixture
def tiny_project(tmp_path: Path) -> Project:
    return make_tiny_project(tmp_path)


@pytest.fixture
def sample_project(tmp_path: Path) -> Project:
    return make_project(tmp_path, SAMPLE_CORPUS, SAMPLE_FIXTURE)


ADDED_PARAGRAPH = "Route tables decide where subnet traffic goes."


def edit_corpus(project: Project, paragraph: str = ADDED_PARAGRAPH) -> None:
    """Append one paragraph to a tiny-corpus file: a content change of the corpus."""
    notes = project.corpus / "alpha" / "notes.md"
    notes.write_text(notes.read_text() + f"\n{paragraph}\n", encoding="utf-8")


def observe_with_sensor(project: Project, cursor: str | None = None) -> dg.SensorResult:
    """Tick corpus_observation_sensor and record its observations as the daemon would."""
    defs = build_definitions(str(project.config_path))
    sensor = defs.resolve_sensor_def("corpus_observation_sensor")
    context = dg.build_sensor_context(instance=project.instance, cursor=cursor, definitions=defs)
    result = sensor(context)
    assert isinstance(result, dg.SensorResult)
    for event in result.asset_events or []:
        assert isinstance(event, dg.AssetObservation)
        project.instance.report_runless_asset_event(event)
    return result
