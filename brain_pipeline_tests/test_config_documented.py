"""The README's configuration table is what `load_config` does.

Each row names a key, the environment variables that override it and its default; a
row that drifts from the code (a renamed variable, a default changed in the shipped file
or the model, a key that no longer exists) fails here, and so does an override the code
honours but the table does not list.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from brain_pipeline.config import ENV_OVERRIDES, GEMINI_KEY_VARIABLES, BrainConfig, load_config

REPO = Path(__file__).resolve().parents[1]
SHIPPED = REPO / "corpus_config.yaml"
HEADER = "| key | environment | default | meaning |"


def _rows() -> list[tuple[str, list[str], str]]:
    """(key, environment variables, default) per row of the README's table."""
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    start = lines.index(HEADER) + 2  # past the header and its rule
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        key, env, default = (cell.strip() for cell in line.strip("|").split("|")[:3])
        rows.append((key.strip("`"), re.findall(r"`([A-Z0-9_]+)`", env), default))
    return rows


ROWS = _rows()


def _value(cfg: BrainConfig, dotted: str) -> Any:
    node: Any = cfg
    for part in dotted.split("."):
        node = getattr(node, part)
    return node


def test_the_table_was_found() -> None:
    assert len(ROWS) > 30 and ROWS[0][0] == "corpus.path"


def test_every_override_the_code_honours_is_in_the_table_and_no_other() -> None:
    documented = {(var, key) for key, variables, _ in ROWS for var in variables}
    secrets = {(var, "(secret)") for var in GEMINI_KEY_VARIABLES}
    instance = {("DAGSTER_HOME", "dagster_home")}  # read by Dagster and instance_home()
    assert documented == set(ENV_OVERRIDES) | secrets | instance


# A valid value per overridable key, and what the loaded configuration holds for it.
SAMPLES: dict[str, tuple[str, Any]] = {
    "corpus.path": ("/tmp/elsewhere/corpus", Path("/tmp/elsewhere/corpus")),
    "build_dir": ("/tmp/elsewhere/build", Path("/tmp/elsewhere/build")),
    "embedding.provider": ("none", "none"),
    "embedding.model": ("gemini-embedding-2", "gemini-embedding-2"),
    "embedding.dimension": ("768", 768),
    "retrieval.mode": ("lexical", "lexical"),
    "evaluation.fixture": ("/tmp/elsewhere/f.json", Path("/tmp/elsewhere/f.json")),
    "publish.root": ("/tmp/elsewhere/agent", Path("/tmp/elsewhere/agent")),
    "publish.s3.bucket": ("a-bucket", "a-bucket"),
    "publish.s3.region": ("eu-west-3", "eu-west-3"),
    "publish.s3.endpoint_url": ("http://127.0.0.1:9000", "http://127.0.0.1:9000"),
    "locks.wait_seconds": ("7", 7),
    "notify.webhook_url": ("https://hooks.example.com/x", "https://hooks.example.com/x"),
    "notify.ui_base_url": ("http://dagster.internal:3000", "http://dagster.internal:3000"),
}


@pytest.mark.parametrize(
    ("variable", "key"),
    [(var, key) for key, variables, _ in ROWS for var in variables if key in SAMPLES],
)
def test_each_documented_variable_overrides_its_key(variable: str, key: str) -> None:
    text, expected = SAMPLES[key]
    cfg = load_config(SHIPPED, env={variable: text})
    assert _value(cfg, key) == expected
    assert _value(load_config(SHIPPED, env={}), key) != expected  # it was the variable


def _documented_default(default: str) -> Any:
    """The table's default as a value; None when it is not a single literal."""
    literal = re.fullmatch(r"`([^`]*)`", default)
    if default == "none":
        return None
    if literal is None:
        return ...  # "see file", a list: not compared here
    text = literal.group(1)
    if text in ("true", "false"):
        return text == "true"
    if re.fullmatch(r"\d+", text):
        return int(text)
    return text


PATH_KEYS = {"corpus.path", "build_dir", "evaluation.fixture"}


@pytest.mark.parametrize(
    ("key", "default"),
    [
        (key, default)
        for key, _, default in ROWS
        if "." in key or key == "build_dir"
        if "<" not in key and _documented_default(default) is not ...
    ],
)
def test_each_documented_default_is_what_the_shipped_file_gives(key: str, default: str) -> None:
    cfg = load_config(SHIPPED, env={})
    key = key.removesuffix(".*")  # a row for a whole section (`notify.email.*`): the section
    expected = _documented_default(default)
    if key == "publish.root":
        assert cfg.publish_root() == REPO / expected
    elif key in PATH_KEYS:
        assert _value(cfg, key) == REPO / expected
    else:
        assert _value(cfg, key) == expected
