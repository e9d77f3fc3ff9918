"""Preflight: check every input a run needs before it does any work.

A new user's first run used to spend twelve minutes embedding and then fail on a fixture
path that did not exist. Everything a run needs from outside (the corpus, the fixture,
the provider's key, a writable build directory and publish root) is cheap to check, so it
is checked first, in well under a second, and each problem is one line that says what to
do next. The command line calls `check_inputs` before it takes a lock or imports Dagster;
a run Dagster launches (UI, schedule, automation) calls it at its first step, so the UI
shows the same line.

Pure core: no Dagster import, no side effect (nothing is created or written).
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from brain_pipeline.config import BrainConfig
from brain_pipeline.corpus.discovery import (
    TEXT_SUFFIXES,
    CorpusFile,
    CorpusNotFoundError,
    CorpusWalk,
    describe_holdings,
)

#: The command that creates a fixture (it appends a query to a file that need not exist).
LABEL_COMMAND = 'brain-pipeline fixture label "QUERY" --area AREA --add ID ...'

#: Assets whose steps read the corpus (the currency check of published_local does too).
_CORPUS_READERS = frozenset({"corpus", "knowledge_chunks", "published_local"})
#: Assets whose run evaluates against the fixture (retrieval_eval is a check on embeddings).
_FIXTURE_READERS = frozenset({"eval_fixture", "embeddings"})
_PUBLISHERS = frozenset({"published_local", "published_s3"})
#: Assets whose steps write the build directory.
_BUILDERS = frozenset({"knowledge_chunks", "knowledge_store", "embeddings"})


NO_LABELS = '{"queries": []}'
"""A fixture with no labels yet: the known-item check is then the gate (docs/evaluation.md)."""


@dataclass(frozen=True)
class Needs:
    """Which inputs a run needs, from the assets it selects (all of them by default)."""

    corpus: bool = True
    fixture: bool = True
    embedding: bool = True
    build_dir: bool = True
    publish: bool = True

    @classmethod
    def for_assets(cls, names: Iterable[str] | None) -> Needs:
        """What a selection of asset names needs; None means every asset."""
        if names is None:
            return cls()
        selected = set(names)
        return cls(
            corpus=bool(selected & _CORPUS_READERS),
            fixture=bool(selected & _FIXTURE_READERS),
            embedding="embeddings" in selected,
            build_dir=bool(selected & _BUILDERS),
            publish=bool(selected & _PUBLISHERS),
        )


@dataclass(frozen=True)
class Problem:
    """One unusable input: the configuration key and a line saying what to do next."""

    key: str
    message: str

    def __str__(self) -> str:
        return self.message


def _origin(cfg: BrainConfig, variable: str, env: Mapping[str, str]) -> str:
    """Where a path setting came from, so a resolved relative path can be recognised."""
    if env.get(variable, "").strip():
        return f"from {variable}; relative paths there start at the working directory"
    if cfg.config_path is not None:
        return f"in {cfg.config_path}; relative paths there start at {cfg.config_path.parent}"
    return "the built-in default"


def _first_file_or_holdings(root: Path) -> tuple[bool, list[str], dict[str, list[str]]]:
    """(an ingestible file exists, the areas, what each area holds), stopping at the first
    ingestible file: a usable corpus costs a few directory listings, not a full walk."""
    walk = CorpusWalk(root)
    holdings: dict[str, list[str]] = defaultdict(list)
    for item in walk:
        if isinstance(item, CorpusFile):
            return True, list(walk.areas), {}
        if item.area:
            holdings[item.area].append(item.source)
    return False, list(walk.areas), dict(holdings)


def check_corpus(cfg: BrainConfig, env: Mapping[str, str]) -> Problem | None:
    """The corpus exists, is a folder, and has an area holding an ingestible file."""
    try:
        path = cfg.corpus_root()
    except CorpusNotFoundError as exc:
        if cfg.corpus.path is None:
            return Problem("corpus.path", str(exc))
        path = cfg.corpus.path  # configured but unusable: said below, with its origin
    where = _origin(cfg, "CURATED_CONTENT_PATH", env)
    if not path.exists():
        return Problem(
            "corpus.path",
            f"corpus {path} does not exist (corpus.path {where}); set corpus.path or "
            "CURATED_CONTENT_PATH to your corpus folder",
        )
    if not path.is_dir():
        return Problem(
            "corpus.path",
            f"corpus {path} is not a folder (corpus.path {where}); a corpus is a folder "
            "with one sub-folder per area",
        )
    try:
        found_file, areas, holdings = _first_file_or_holdings(path)
    except (CorpusNotFoundError, OSError) as exc:
        return Problem("corpus.path", f"corpus {path} cannot be read: {exc}")
    if found_file:
        return None
    readable = f"{', '.join(TEXT_SUFFIXES)} or roadmap .json"
    if not areas:
        return Problem(
            "corpus.path",
            f"corpus {path} has no area folder: put each area's files ({readable}) in a "
            f"sub-folder, e.g. {path / 'my-area'}",
        )
    held = "; ".join(f"{area}: {describe_holdings(holdings.get(area, []))}" for area in areas)
    return Problem(
        "corpus.path",
        f"corpus {path} has no file the ingest reads ({readable}) in any area ({held})",
    )


def check_fixture(cfg: BrainConfig, env: Mapping[str, str]) -> Problem | None:
    """The fixture exists and parses; when it does not exist, how to create one."""
    from brain_pipeline.evaluation.fixture.model import FixtureError, load_fixture

    path = cfg.evaluation.fixture
    where = _origin(cfg, "BRAIN_EVAL_FIXTURE", env)
    if not path.exists():
        return Problem(
            "evaluation.fixture",
            f"fixture {path} does not exist (evaluation.fixture {where}); create one with "
            f"`{LABEL_COMMAND}`, or write {NO_LABELS} there to publish with the known-item "
            "check alone, or point evaluation.fixture / BRAIN_EVAL_FIXTURE at yours",
        )
    if path.is_dir():
        return Problem(
            "evaluation.fixture",
            f"fixture {path} is a folder (evaluation.fixture {where}); it must name a JSON file",
        )
    try:
        load_fixture(path, allow_empty=True)  # no labels yet: the known-item check gates
    except FixtureError as exc:
        message = " ".join(str(exc).split())
        return Problem("evaluation.fixture", f"fixture unusable: {message}")
    return None


def check_embedding(cfg: BrainConfig) -> Problem | None:
    """The provider can run: Gemini has a key, the local model is installed (the
    factory's one check, which searches and evaluations say too)."""
    from brain_pipeline.embedding.factory import provider_problem

    problem = provider_problem(cfg)
    return Problem("embedding.provider", problem) if problem is not None else None


def check_writable(key: str, target: Path, what: str) -> Problem | None:
    """`target` is, or can be created as, a folder this process may write in."""
    probe = target
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if not probe.is_dir():
        return Problem(key, f"{what} {target} cannot be created: {probe} is not a folder")
    if not os.access(probe, os.W_OK | os.X_OK):
        return Problem(key, f"{what} {target} is not writable ({probe} refuses writes)")
    return None


def check_inputs(
    cfg: BrainConfig, needs: Needs | None = None, env: Mapping[str, str] | None = None
) -> list[Problem]:
    """Every problem with the inputs `needs` names, in the order a person fixes them."""
    needs = needs or Needs()
    env = os.environ if env is None else env
    problems: list[Problem | None] = []
    if needs.corpus:
        problems.append(check_corpus(cfg, env))
    if needs.fixture:
        problems.append(check_fixture(cfg, env))
    if needs.embedding:
        problems.append(check_embedding(cfg))
    if needs.build_dir:
        problems.append(check_writable("build_dir", cfg.build_dir, "build directory"))
    if needs.publish:
        problems.append(check_writable("publish.root", cfg.publish_root(), "publish root"))
    return [p for p in problems if p is not None]


def describe_inputs(cfg: BrainConfig) -> str:
    """One line naming what a run will read and where it will write (paths resolved)."""
    return (
        f"corpus {cfg.corpus_found() or '(not found)'}, fixture {cfg.evaluation.fixture}, "
        f"embedding {cfg.provider_label()}, publish to {cfg.publish_root()}"
    )
