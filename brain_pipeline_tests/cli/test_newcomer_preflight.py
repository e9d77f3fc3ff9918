"""A new user's first hour: their own corpus, no Gemini key, a configuration kept outside
the project (issue #16, items 1, 4, 5, 6).

Every command runs as a real process (`python -m brain_pipeline.cli`) with the
configuration named by BRAIN_CONFIG, as a person would type it. Refusals are checked for
what they promise: exit 2, one line naming the resolved path and what to do next, and no
work done: Dagster is never imported, and neither the build directory nor the instance
folder is created.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from brain_pipeline.config import load_config
from brain_pipeline.preflight import LABEL_COMMAND, Needs, check_inputs
from brain_pipeline_tests.tiny_corpus import PARAGRAPHS, write_tiny_corpus

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "examples" / "curated-content"
KEYS = ("GEMINI_API_KEY", "GOOGLE_API_KEY")  # a newcomer has none

# Prints whether Dagster was imported, so a refusal can prove it did no work.
PROBE = (
    "import sys\n"
    "from brain_pipeline.cli import main\n"
    "code = main(sys.argv[1:])\n"
    "print('dagster imported:', 'dagster' in sys.modules)\n"
    "sys.exit(code)\n"
)


def chunk_id(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


@dataclass
class Newcomer:
    home: Path  # where they keep their configuration, far from the project
    corpus: Path
    config: Path
    dagster_home: Path

    @property
    def build(self) -> Path:
        return self.home / "build"

    def write_config(self, **sections: object) -> None:
        self.config.write_text(yaml.safe_dump(sections), encoding="utf-8")

    def run(
        self, *argv: str, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        full = {
            **{k: v for k, v in os.environ.items() if k not in KEYS},
            "BRAIN_CONFIG": str(self.config),
            "DAGSTER_HOME": str(self.dagster_home),
            "PYTHONPATH": str(REPO),
            **(env or {}),
        }
        return subprocess.run(
            [sys.executable, "-c", PROBE, *argv],
            cwd=self.home,
            env=full,
            capture_output=True,
            text=True,
            timeout=600,
        )




@pytest.fixture
def newcomer(tmp_path: Path) -> Newcomer:
    home = tmp_path / "elsewhere" / "my-config"
    corpus = tmp_path / "my-corpus"
    write_tiny_corpus(corpus)
    home.mkdir(parents=True)
    person = Newcomer(home, corpus, home / "corpus_config.yaml", tmp_path / "dagster-home")
    person.write_config(
        corpus={"path": str(corpus), "candidates": []},
        build_dir="build",
        # Copied from the project's file: relative, so it names a file beside this config.
        evaluation={"fixture": "examples/retrieval-eval.json"},
        publish={"root": str(tmp_path / "agent")},
        schedule={"enabled": False},
    )
    return person


def write_fixture(person: Newcomer) -> Path:
    fixture = person.home / "eval.json"
    queries = [
        {"query": "stateful firewall", "area": "networks",
         "relevant": [chunk_id(PARAGRAPHS["networks"][2])]},
        {"query": "find rows without scanning", "area": "databases",
         "relevant": [chunk_id(PARAGRAPHS["databases"][1])]},
    ]
    fixture.write_text(json.dumps({"queries": queries}), encoding="utf-8")
    data = yaml.safe_load(person.config.read_text())
    data["evaluation"] = {"fixture": "eval.json", "thresholds": {"bm25": {"min_ndcg_at_10": 0.5}}}
    person.config.write_text(yaml.safe_dump(data), encoding="utf-8")
    return fixture


def assert_refused(
    person: Newcomer, result: subprocess.CompletedProcess[str], *needles: str
) -> str:
    """Exit 2, one line, no work: Dagster not imported, nothing created."""
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1, result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    assert "dagster imported: False" in result.stdout
    assert not person.build.exists() and not person.dagster_home.exists()
    return lines[0]


# ---- item 1: preflight -----------------------------------------------------------------


def test_a_missing_relative_fixture_is_refused_with_its_resolved_path_and_how_to_make_one(
    newcomer: Newcomer,
) -> None:
    line = assert_refused(newcomer, newcomer.run("materialize"))
    resolved = newcomer.home / "examples" / "retrieval-eval.json"
    assert f"fixture {resolved} does not exist" in line
    assert str(newcomer.config) in line  # where the relative path came from
    assert LABEL_COMMAND in line


def test_an_unparsable_fixture_is_refused(newcomer: Newcomer) -> None:
    fixture = write_fixture(newcomer)
    fixture.write_text('{"queries": [', encoding="utf-8")
    assert_refused(newcomer, newcomer.run("materialize"), "fixture unusable", str(fixture))


def test_a_missing_corpus_is_refused(newcomer: Newcomer) -> None:
    write_fixture(newcomer)
    gone = newcomer.corpus.parent / "not-there"
    assert_refused(
        newcomer,
        newcomer.run("materialize", env={"CURATED_CONTENT_PATH": str(gone)}),
        f"corpus {gone} does not exist",
        "CURATED_CONTENT_PATH",
    )


def test_a_corpus_with_nothing_ingestible_names_what_its_areas_hold(newcomer: Newcomer) -> None:
    write_fixture(newcomer)
    odd = newcomer.corpus.parent / "odd-corpus"
    (odd / "docs").mkdir(parents=True)
    for name in ("a.rst", "b.rst", "logo.png"):
        (odd / "docs" / name).write_bytes(b"x" * 40)
    assert_refused(
        newcomer,
        newcomer.run("materialize", env={"CURATED_CONTENT_PATH": str(odd)}),
        "no file the ingest reads",
        "docs: 2 .rst, 1 .png",
    )


def test_provider_gemini_without_a_key_is_refused(newcomer: Newcomer) -> None:
    write_fixture(newcomer)
    assert_refused(
        newcomer,
        newcomer.run("materialize", env={"BRAIN_EMBEDDING_PROVIDER": "gemini"}),
        "GEMINI_API_KEY",
    )


def test_a_publish_root_that_cannot_be_created_is_refused(newcomer: Newcomer) -> None:
    write_fixture(newcomer)
    blocker = newcomer.home / "a-file"
    blocker.write_text("not a folder")
    assert_refused(
        newcomer,
        newcomer.run("materialize", env={"BRAIN_PUBLISH_ROOT": str(blocker / "agent")}),
        "publish root",
        "is not a folder",
    )


def test_a_selection_checks_only_what_it_needs(newcomer: Newcomer) -> None:
    """The ingest alone needs no fixture; the preflight of `--select` says so."""
    cfg = load_config(newcomer.config, env={})
    ingest_only = Needs.for_assets(["corpus", "knowledge_chunks", "knowledge_store"])
    assert check_inputs(cfg, ingest_only, env={}) == []
    assert [p.key for p in check_inputs(cfg, Needs(), env={})] == ["evaluation.fixture"]


def test_a_run_dagster_launches_fails_its_first_step_with_the_same_line(
    newcomer: Newcomer,
) -> None:
    """What a UI launch does: no CLI preflight, the run itself refuses; `eval_fixture`
    never reports success for a fixture that does not exist, and nothing is embedded."""
    import dagster as dg

    from brain_pipeline.definitions import build_definitions
    from brain_pipeline.lib.runner import materialize_selection

    cfg = load_config(newcomer.config, env={})
    (expected,) = check_inputs(cfg, Needs(), env={})
    lines: list[str] = []
    with dg.instance_for_test() as instance:
        outcome = materialize_selection(
            "*",
            definitions=build_definitions(str(newcomer.config)),
            instance=instance,
            echo=lines.append,
        )
    assert not outcome.success
    assert f"  FAILED   eval_fixture: {expected.message}" in lines
    assert "  ok       eval_fixture" not in lines
    assert not any(line.startswith("  ok       embeddings") for line in lines)
    assert not (newcomer.build / "embeddings.bin").exists()


# ---- items 4 and 5: the no-key default, and output a person reads ------------------------


def test_the_default_first_run_without_a_key_is_lexical_and_says_warn_not_failed(
    newcomer: Newcomer,
) -> None:
    write_fixture(newcomer)
    # An area of .rst and .png only: the run goes on, and no_empty_area names it.
    (newcomer.corpus / "sphinx-docs").mkdir()
    (newcomer.corpus / "sphinx-docs" / "index.rst").write_text("Title\n=====\n" * 4)
    (newcomer.corpus / "sphinx-docs" / "diagram.png").write_bytes(b"\x89PNG" + b"\0" * 64)
    result = newcomer.run("materialize")
    assert result.returncode == 0, result.stderr
    summary = result.stdout
    assert "run summary (embedding: none, lexical only (auto: no Gemini key" in summary
    assert "lexical BM25 nDCG@10" in summary and "hybrid nDCG@10" not in summary
    assert "FAILED" not in summary + result.stderr
    assert "  check    no_empty_area: WARN" in summary
    assert "sphinx-docs (holds 1 .png, 1 .rst)" in summary
    assert "  check    vectors_reach_agent: WARN" in summary
    # One line per check: no `ok <asset>_<check>` step line repeats it.
    assert "_no_empty_area" not in summary and "_retrieval_eval" not in summary
    # Nothing embedded; the store is published exactly as built.
    assert not (newcomer.build / "embeddings.bin").exists()
    published = newcomer.home.parent.parent / "agent" / "src" / "storage" / "knowledge-store.json"
    assert published.read_bytes() == (newcomer.build / "knowledge-store.json").read_bytes()


# ---- item 6: status and ui at the edges ----------------------------------------------------


def test_status_never_says_current_when_the_corpus_cannot_be_read(newcomer: Newcomer) -> None:
    write_fixture(newcomer)
    assert newcomer.run("materialize").returncode == 0
    assert newcomer.run("status").returncode == 0
    moved = newcomer.corpus.rename(newcomer.corpus.parent / "moved-away")
    result = newcomer.run("status")
    assert result.returncode == 6, result.stdout + result.stderr
    assert "CANNOT BE READ" in result.stdout and "live and current" not in result.stdout
    moved.rename(newcomer.corpus)
    assert newcomer.run("status").returncode == 0


def test_ui_refuses_a_busy_port_in_one_line(newcomer: Newcomer) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = newcomer.run("ui", "-p", str(port))
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"brain-pipeline ui: port {port} on 127.0.0.1 is in use; choose another with -p PORT"
    )


def test_ui_builds_a_workspace_for_a_configuration_outside_the_project(
    newcomer: Newcomer,
) -> None:
    from brain_pipeline.cli.ui import workspace_for

    cfg = load_config(newcomer.config, env={"DAGSTER_HOME": str(newcomer.dagster_home)})
    assert not (newcomer.home / "workspace.yaml").exists()
    os.environ["DAGSTER_HOME"] = str(newcomer.dagster_home)  # removed by the autouse fixture
    workspace = workspace_for(cfg)
    # With the build directory, never in DAGSTER_HOME (the user's; it may be read-only).
    assert workspace == cfg.build_dir / "state" / "workspace.yaml"
    assert not (newcomer.dagster_home / "workspace.yaml").exists()
    (entry,) = yaml.safe_load(workspace.read_text())["load_from"]
    module = entry["python_module"]
    assert module["location_name"] == "brain_pipeline"
    assert module["module_name"] == "brain_pipeline.definitions"
    assert Path(module["working_directory"], "brain_pipeline", "definitions.py").is_file()
    # The project's own file wins where one sits beside the configuration.
    project = load_config(REPO / "corpus_config.yaml", env={})
    assert workspace_for(project) == REPO / "workspace.yaml"


# ---- item 5: Ctrl-C while embedding --------------------------------------------------------


def interrupt_at_first_progress(person: Newcomer) -> tuple[int, str]:
    """Start materialize, press Ctrl-C once it reports embedded texts; (exit, stderr)."""
    env = {
        **{k: v for k, v in os.environ.items() if k not in KEYS},
        "BRAIN_CONFIG": str(person.config),
        "DAGSTER_HOME": str(person.dagster_home),
        "PYTHONPATH": str(REPO),
    }
    restore: Callable[[], None] = lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)  # noqa: E731
    process = subprocess.Popen(
        [sys.executable, "-m", "brain_pipeline.cli", "materialize"],
        cwd=person.home, env=env, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        preexec_fn=restore,
    )
    assert process.stderr is not None
    seen: list[str] = []
    for line in process.stderr:
        seen.append(line)
        if "/s, about" in line:  # a figure the builder reported after a packed batch
            process.send_signal(signal.SIGINT)
            break
    _, rest = process.communicate(timeout=300)
    return process.returncode, "".join(seen) + rest


def test_ctrl_c_while_embedding_is_one_line_exit_130_and_the_count_is_in_the_packs(
    newcomer: Newcomer,
) -> None:
    data = yaml.safe_load(newcomer.config.read_text())
    data["corpus"]["path"] = str(SAMPLE)
    data["embedding"] = {"provider": "local"}
    data["evaluation"] = {"fixture": str(REPO / "examples" / "retrieval-eval.json")}
    newcomer.config.write_text(yaml.safe_dump(data), encoding="utf-8")
    code, stderr = interrupt_at_first_progress(newcomer)
    assert code == 130, stderr
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("brain-pipeline materialize: interrupted; ")
    assert "Traceback" not in stderr and "No user initiated termination" not in stderr
    saved = int(last.split("interrupted; ")[1].split()[0])
    shown = max(
        int(line.split("embedded ")[1].split("/")[0].replace(",", ""))
        for line in stderr.splitlines()
        if "embedded " in line and "/" in line
    )
    assert 0 < shown <= saved  # never claims what the packs do not hold
    # The next run finds exactly that many in the vector packs.
    code, stderr = interrupt_at_first_progress(newcomer)
    assert f"{saved} reused ({saved} from packs)" in stderr, stderr
