"""A new user's first fixture on their own corpus, through the real CLI only.

The setting of issue #16: a generated four-area corpus, the configuration in a folder of
its own (outside the project, not the working directory), no Gemini key, no
`materialize` ever run. Everything is driven through `brain_pipeline.cli.main` (and
once through `python -m brain_pipeline.cli` in a subprocess); nobody edits the JSON.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from brain_pipeline.cli import main
from brain_pipeline.corpus.store import chunk_id
from brain_pipeline.evaluation.fixture.model import load_fixture

REPO = Path(__file__).resolve().parents[2]

# Four areas, two files each, paragraphs with distinct vocabularies so BM25 ranks the
# paragraph a question was written for first.
CORPUS: dict[str, dict[str, list[str]]] = {
    "english-exams": {
        "writing.md": [
            "# Essay writing",
            "A discursive essay weighs both sides of an argument before the writer "
            "states a conclusion in the final paragraph.",
            "Linking words such as however, moreover and consequently guide the "
            "examiner through the structure of the essay.",
        ],
        "listening.md": [
            "# Listening paper",
            "In the listening paper each recording is played twice, and candidates "
            "transfer their answers to the answer sheet at the end.",
        ],
    },
    "maths": {
        "algebra.md": [
            "# Quadratics",
            "A quadratic equation has two roots, found with the quadratic formula "
            "or by factorising the polynomial.",
            "The discriminant tells whether the roots are real, repeated or complex.",
        ],
        "geometry.md": [
            "Pythagoras' theorem relates the sides of a right-angled triangle: the "
            "square on the hypotenuse equals the sum of the other two squares.",
        ],
    },
    "biology": {
        "cells.md": [
            "Mitochondria release energy from glucose during aerobic respiration.",
            "Ribosomes assemble proteins from amino acids following messenger RNA.",
        ],
        "ecology.md": ["A food web shows how energy passes between producers and consumers."],
    },
    "history": {
        "industrial.md": [
            "Steam engines powered the textile mills of the industrial revolution.",
        ],
        "empires.md": ["Roman roads connected the provinces of the empire to its capital."],
    },
}

ESSAY = CORPUS["english-exams"]["writing.md"][1]
LINKING = CORPUS["english-exams"]["writing.md"][2]
LISTENING = CORPUS["english-exams"]["listening.md"][1]
QUADRATIC = CORPUS["maths"]["algebra.md"][1]


@dataclass
class Newcomer:
    corpus: Path
    config: Path
    fixture: Path
    build: Path


def _write_corpus(root: Path) -> None:
    for area, files in CORPUS.items():
        for name, paragraphs in files.items():
            path = root / area / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("\n\n".join(paragraphs) + "\n", encoding="utf-8")


@pytest.fixture
def newcomer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Newcomer:
    corpus = tmp_path / "my-notes"
    _write_corpus(corpus)
    settings = tmp_path / "settings"  # the config lives outside the project
    settings.mkdir()
    config = settings / "brain.yaml"
    fixture = settings / "my-fixture.json"
    build = tmp_path / "build"
    config.write_text(
        f"corpus:\n  path: {corpus}\n"
        f"build_dir: {build}\n"
        f"publish:\n  root: {tmp_path / 'agent'}\n"
        f"evaluation:\n  fixture: {fixture}\n"
    )
    for name in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "BRAIN_EVAL_FIXTURE", "BRAIN_BUILD_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("BRAIN_CONFIG", str(config))
    workdir = tmp_path / "elsewhere"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    return Newcomer(corpus, config, fixture, build)


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _first_query(newcomer: Newcomer, capsys: pytest.CaptureFixture[str]) -> None:
    query = "how should a discursive essay end"
    code, out, _ = _run(["fixture", "label", query, "--area", "english-exams"], capsys)
    assert code == 0
    assert chunk_id(ESSAY) in out
    code, out, _ = _run(
        ["fixture", "label", query, "--area", "english-exams", "--add", chunk_id(ESSAY)], capsys
    )
    assert code == 0 and "created" in out


def test_check_before_any_fixture_says_how_to_start_without_materialize(
    newcomer: Newcomer, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _run(["fixture", "check"], capsys)
    assert code == 2
    (line,) = err.strip().splitlines()
    assert str(newcomer.fixture) in line and "brain-pipeline fixture label" in line
    assert "brain-pipeline materialize" not in line


def test_a_fixture_from_nothing_then_an_id_found_by_text(
    newcomer: Newcomer, capsys: pytest.CaptureFixture[str]
) -> None:
    assert not newcomer.build.exists()  # no materialize has ever run
    _first_query(newcomer, capsys)
    assert (newcomer.build / "knowledge-store.json").is_file()
    document = json.loads(newcomer.fixture.read_text())
    assert document["$comment"] and "fixture label" in document["$comment"][0]
    assert document["queries"] == [
        {
            "query": "how should a discursive essay end",
            "area": "english-exams",
            "relevant": [chunk_id(ESSAY)],
        }
    ]

    # A second answer, found by a piece of its text rather than by rank.
    code, out, _ = _run(
        ["fixture", "find", "however, MOREOVER and\nconsequently", "--area", "english-exams"],
        capsys,
    )
    assert code == 0
    assert out.splitlines()[0].startswith(
        f"{chunk_id(LINKING)}  english-exams  english-exams/writing.md § Essay writing"
    )
    code, out, _ = _run(["fixture", "show", chunk_id(LINKING)], capsys)
    assert code == 0 and f"  | {LINKING}" in out
    code, out, _ = _run(
        [
            "fixture",
            "label",
            "how should a discursive essay end",
            "--area",
            "english-exams",
            "--add",
            chunk_id(LINKING),
        ],
        capsys,
    )
    assert code == 0 and "extended the existing query with 1 id(s)" in out
    code, out, _ = _run(["fixture", "find", "no paragraph says this", "--area", "maths"], capsys)
    assert code == 1

    fixture = load_fixture(newcomer.fixture)
    assert fixture.queries[0].relevant == (chunk_id(ESSAY), chunk_id(LINKING))
    code, out, _ = _run(["fixture", "check"], capsys)
    assert code == 0 and "no stale labels" in out


def test_an_empty_fixture_takes_its_first_query(
    newcomer: Newcomer, capsys: pytest.CaptureFixture[str]
) -> None:
    newcomer.fixture.write_text('{"queries": []}\n')
    code, out, _ = _run(
        ["fixture", "label", "quadratic roots", "--area", "maths", "--add", chunk_id(QUADRATIC)],
        capsys,
    )
    assert code == 0 and "appended a new query" in out
    assert load_fixture(newcomer.fixture).queries[0].relevant == (chunk_id(QUADRATIC),)


def test_a_typo_in_an_id_or_area_is_one_line_and_writes_nothing(
    newcomer: Newcomer, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _run(["fixture", "label", "q", "--area", "maths", "--add", "0" * 12], capsys)
    (line,) = [line for line in err.splitlines() if line.startswith("brain-pipeline fixture:")]
    assert code == 2 and "nothing written" in line and "fixture find" in line
    code, _, err = _run(["fixture", "label", "q", "--area", "math", "--add", "0" * 12], capsys)
    assert code == 2 and "areas: biology, english-exams, history, maths" in err
    assert not newcomer.fixture.exists()


def test_an_area_folder_rename_is_repaired_by_repair_write(
    newcomer: Newcomer, capsys: pytest.CaptureFixture[str]
) -> None:
    _first_query(newcomer, capsys)
    assert _run(["fixture", "label", "quadratic roots", "--area", "maths", "--add",
                 chunk_id(QUADRATIC)], capsys)[0] == 0  # fmt: skip
    (newcomer.corpus / "english-exams").rename(newcomer.corpus / "exams")

    code, out, _ = _run(["fixture", "check"], capsys)
    assert code == 1
    assert "apply the automatic repairs: brain-pipeline fixture repair --write" in out
    assert "fixture repair   (" not in out  # no bare pointer to repair that fixes nothing
    code, out, err = _run(["fixture", "repair", "--write"], capsys)
    assert code == 0, out + err
    assert "moved 1 query(ies)" in err

    fixture = load_fixture(newcomer.fixture)
    assert [(q.query, q.area) for q in fixture.queries] == [
        ("how should a discursive essay end", "exams"),
        ("quadratic roots", "maths"),
    ]
    assert fixture.queries[0].relevant == (chunk_id(ESSAY),)
    assert json.loads(newcomer.fixture.read_text())["$comment"][-1].endswith(
        "moved 1 query(ies) to the area of their labels: "
        "'how should a discursive essay end' english-exams -> exams"
    )
    code, out, _ = _run(["fixture", "check"], capsys)
    assert code == 0 and "no stale labels" in out


def _follow(step: str) -> list[str]:
    """The argv of an advised command: the part after ': ', up to any '   (' remark, with
    the '--add ID...' placeholder (a person's choice) left out."""
    command = step.split(": ", 1)[1].split("   (", 1)[0].replace(" --add ID...", "")
    argv = shlex.split(command)
    assert argv[0] == "brain-pipeline"
    return argv[1:]


def test_the_advice_of_check_and_repair_followed_ends_in_a_passing_check(
    newcomer: Newcomer, capsys: pytest.CaptureFixture[str]
) -> None:
    _first_query(newcomer, capsys)
    listening = "what happens to recordings in the listening paper"
    assert _run(["fixture", "label", listening, "--area", "english-exams", "--add",
                 chunk_id(LISTENING)], capsys)[0] == 0  # fmt: skip
    # A rename and, in the renamed area, a labelled paragraph deleted: one repair for
    # the tool (the area), one for a person (the deleted answer).
    (newcomer.corpus / "english-exams").rename(newcomer.corpus / "exams")
    (newcomer.corpus / "exams" / "listening.md").write_text("# Listening paper\n")

    followed: list[list[str]] = []
    for _ in range(6):
        code, out, _ = _run(["fixture", "check"], capsys)
        if code == 0:
            break
        assert code == 1
        steps = [line.strip() for line in out.split("; next:", 1)[1].splitlines() if line.strip()]
        assert steps and all("brain-pipeline fixture check" not in s for s in steps)
        for step in steps:
            argv = _follow(step)
            assert argv not in followed, f"advised twice: {argv}"
            followed.append(argv)
            code, out, err = _run(argv, capsys)
            assert code in (0, 1), out + err
            assert argv[:2] != ["fixture", "repair"] or "repair" not in err.split("need a")[0]
    else:
        pytest.fail(f"check never passed; followed {followed}")
    assert ["fixture", "repair", "--write"] in followed
    fixture = load_fixture(newcomer.fixture)
    assert [(q.query, q.area) for q in fixture.queries] == [
        ("how should a discursive essay end", "exams")
    ]  # the query whose only answer was deleted is gone, by the person's --remove


def test_a_fixture_labelled_on_another_corpus_is_said_in_two_lines(
    newcomer: Newcomer, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copyfile(REPO / "examples" / "retrieval-eval.json", newcomer.fixture)
    for action in ("check", "repair"):
        code, out, err = _run(["fixture", action], capsys)
        assert code == 1
        lines = out.strip().splitlines()
        assert len(lines) == 2, out
        assert "labelled on another corpus" in lines[0]
        assert "BRAIN_EVAL_FIXTURE" in lines[1] and "fixture label" in lines[1]


def test_the_installed_entry_point_starts_a_fixture(newcomer: Newcomer) -> None:
    """The same first step through `python -m brain_pipeline.cli`, a process of its own."""
    env = {k: v for k, v in os.environ.items() if k not in ("GEMINI_API_KEY", "GOOGLE_API_KEY")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    argv = [sys.executable, "-m", "brain_pipeline.cli", "fixture", "label"]
    argv += ["quadratic roots", "--area", "maths", "--add", chunk_id(QUADRATIC)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "created with its first query" in done.stdout
    assert load_fixture(newcomer.fixture).queries[0].area == "maths"


def test_the_next_materialize_finds_what_the_fixture_tools_built_current(
    newcomer: Newcomer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """The refresh is the pipeline's own ingest steps, records included: the store step of
    the next run has nothing to do (its record is still the one the refresh wrote)."""
    from brain_pipeline.state.layout import StateLayout
    from brain_pipeline.state.records import read_record
    from brain_pipeline.steps.refresh_store import RUN_ID

    _first_query(newcomer, capsys)
    layout = StateLayout.of(newcomer.build)
    before = read_record(layout, "knowledge_store")
    assert before is not None and before.run_id == RUN_ID
    store_bytes = layout.store_file.read_bytes()
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster-home"))
    code, out, err = _run(["materialize"], capsys)
    assert code == 0, out + err
    after = read_record(layout, "knowledge_store")
    assert after == before  # not reassembled, not re-recorded
    assert layout.store_file.read_bytes() == store_bytes
    assert (tmp_path / "agent" / "src" / "storage" / "knowledge-store.json").read_bytes() == (
        store_bytes
    )
