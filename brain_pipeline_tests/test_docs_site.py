"""The README and the docs site keep their promises to a newcomer.

The README opens with the two commands a newcomer copies and stays short; every page in
docs/ is in the site's nav, and every docs page the README links to exists. The two
generated parts (configuration reference, benchmark tables) are what tools/gen_docs.py
makes now. `mkdocs build --strict` in .ci/run checks the links between pages.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCS = REPO / "docs"

sys.path.insert(0, str(REPO / "tools"))

import gen_docs  # noqa: E402  (tools/gen_docs.py, a script beside the project)


def test_the_readme_opens_with_the_two_commands() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    fence = lines.index("```bash")
    first, second = lines[fence + 1], lines[fence + 2]
    assert first.startswith('python -m pip install -e ".[dev]" && brain-pipeline materialize')
    assert second.startswith("python -m pytest")
    assert fence < 5


def test_the_readme_is_short() -> None:
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 150


def test_the_readme_names_the_one_command_that_serves_the_docs() -> None:
    assert "`mkdocs serve`" in README.read_text(encoding="utf-8")


def test_every_docs_page_the_readme_links_exists() -> None:
    links = re.findall(r"\]\((docs/[^)#]+)", README.read_text(encoding="utf-8"))
    assert len(set(links)) >= 9
    assert [link for link in links if not (REPO / link).is_file()] == []


def test_every_page_is_in_the_nav_and_every_nav_entry_is_a_page() -> None:
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))
    nav = {page for entry in config["nav"] for page in entry.values()}
    assert nav == {path.name for path in DOCS.glob("*.md")}


def test_the_benchmark_page_is_what_the_results_files_make() -> None:
    assert (DOCS / "benchmarks.md").read_text(encoding="utf-8") == gen_docs.rendered(
        "benchmarks.md"
    ), "docs/benchmarks.md is stale: run python tools/gen_docs.py"


def test_every_benchmark_section_names_its_command_and_machine() -> None:
    sections = gen_docs.benchmark_sections().split("\n### ")[1:]
    assert len(sections) > 15
    for section in sections:
        assert "```bash\npython benchmarks/bench_" in section or "brain-pipeline bench" in section
        assert "\nMeasured 20" in section
