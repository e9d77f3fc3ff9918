"""The configuration reference (docs/configuration.md) is what `load_config` does.

The table is generated from the configuration model by tools/gen_docs.py; here it is read
back as a reader sees it and held against the code's behaviour: each row names a key, its
default in the model, the value the shipped file sets and the environment variables that
override it. A row that drifts from the code (a renamed variable, a default changed in the
shipped file or the model, a key that no longer exists) fails here, and so does an
override the code honours but the table does not list, or a page not regenerated.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest

from brain_pipeline.config import ENV_OVERRIDES, GEMINI_KEY_VARIABLES, BrainConfig, load_config

REPO = Path(__file__).resolve().parents[1]
SHIPPED = REPO / "corpus_config.yaml"
PAGE = REPO / "docs" / "configuration.md"
HEADER = "| key | accepts | default | `corpus_config.yaml` | environment | meaning |"

sys.path.insert(0, str(REPO / "tools"))

import gen_docs  # noqa: E402  (tools/gen_docs.py, a script beside the project)


def _cells(line: str) -> list[str]:
    """A table row's cells; `\\|` inside a cell (between literals) is not a separator."""
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip().strip("|"))]


def _rows() -> list[tuple[str, list[str], str, str]]:
    """(key, environment variables, model default, shipped value) per row of the page."""
    lines = PAGE.read_text(encoding="utf-8").splitlines()
    start = lines.index(HEADER) + 2  # past the header and its rule
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        key, _, default, shipped, env = _cells(line)[:5]
        rows.append((key.strip("`"), re.findall(r"`([A-Z0-9_]+)`", env), default, shipped))
    return rows


ROWS = _rows()


def test_the_page_is_what_the_generator_makes_of_the_model() -> None:
    assert PAGE.read_text(encoding="utf-8") == gen_docs.rendered("configuration.md"), (
        "docs/configuration.md is stale: run python tools/gen_docs.py"
    )


def test_every_key_of_the_model_has_a_row() -> None:
    documented = {key for key, *_ in ROWS}
    assert {key for key, *_ in gen_docs.config_keys()} <= documented
    assert "evaluation.on_regression" in documented and "notify.email.host" in documented


def _value(cfg: BrainConfig, dotted: str) -> Any:
    node: Any = cfg
    for part in dotted.split("."):
        node = getattr(node, part)
    return node


def test_the_table_was_found() -> None:
    assert len(ROWS) > 30 and ROWS[0][0] == "corpus.path"


def test_every_override_the_code_honours_is_in_the_table_and_no_other() -> None:
    documented = {(var, key) for key, variables, _, _ in ROWS for var in variables}
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
    [(var, key) for key, variables, _, _ in ROWS for var in variables if key in SAMPLES],
)
def test_each_documented_variable_overrides_its_key(variable: str, key: str) -> None:
    text, expected = SAMPLES[key]
    cfg = load_config(SHIPPED, env={variable: text})
    assert _value(cfg, key) == expected
    assert _value(load_config(SHIPPED, env={}), key) != expected  # it was the variable


def _documented_default(default: str) -> Any:
    """The table's value as a value; ... when it is not a single literal."""
    literal = re.fullmatch(r"`([^`]*)`", default)
    if default == "none":
        return None
    if default == "empty":
        return ""
    if literal is None:
        return ...  # "required", a list, per-retriever values: not compared here
    text = literal.group(1)
    if text in ("true", "false"):
        return text == "true"
    if re.fullmatch(r"\d+", text):
        return int(text)
    if re.fullmatch(r"\d+\.\d+", text):
        return float(text)
    return text


PATH_KEYS = {"corpus.path", "build_dir", "evaluation.fixture", "publish.root"}
#: Keys the model normalises: the prefix always ends in "/" (an empty one stays empty).
NORMALISED = {"publish.s3.prefix"}


@pytest.mark.parametrize(
    ("key", "default", "shipped"),
    [
        (key, default, shipped)
        for key, _, default, shipped in ROWS
        if "<" not in key and key != "(secret)" and key not in NORMALISED | {"dagster_home"}
        if ".email." not in key and _documented_default(shipped or default) is not ...
    ],
)
def test_each_documented_value_is_what_the_shipped_file_gives(
    key: str, default: str, shipped: str
) -> None:
    cfg = load_config(SHIPPED, env={})
    expected = _documented_default(shipped or default)  # the file's value, else the model's
    if key in PATH_KEYS and expected is not None:
        assert _value(cfg, key) == REPO / expected
    else:
        assert _value(cfg, key) == expected


@pytest.mark.parametrize(
    ("key", "default"),
    [
        (key, default)
        for key, _, default, _ in ROWS
        if "<" not in key and key != "(secret)" and ".email." not in key
        if _documented_default(default) is not ...
    ],
)
def test_each_documented_default_is_the_models(
    key: str, default: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no corpus_config.yaml here: the built-in defaults
    cfg = load_config(env={})
    assert cfg.config_path is None
    expected = _documented_default(default)
    if key in PATH_KEYS and expected is not None:
        assert _value(cfg, key) == tmp_path / expected
    else:
        assert _value(cfg, key) == expected


def test_the_email_sections_documented_defaults(tmp_path: Path) -> None:
    # the section is optional: its defaults apply once it is given with its required keys
    config = tmp_path / "corpus_config.yaml"
    config.write_text(
        "notify: {email: {host: smtp.example.org, sender: a@example.org, "
        "recipients: [b@example.org]}}\n",
        encoding="utf-8",
    )
    cfg = load_config(config, env={})
    rows = {key: default for key, _, default, _ in ROWS if key.startswith("notify.email.")}
    assert {k for k, v in rows.items() if v == "required"} == {
        "notify.email.host", "notify.email.sender", "notify.email.recipients"
    }
    for key, default in rows.items():
        if default != "required":
            assert _value(cfg, key) == _documented_default(default), key
