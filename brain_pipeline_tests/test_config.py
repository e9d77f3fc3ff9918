"""corpus_config.yaml + environment: validation, overrides, corpus resolution, secrets."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from brain_pipeline.config import (
    ConfigError,
    CorpusNotFoundError,
    load_config,
)
from brain_pipeline.instance import ensure_instance_home

REPO = Path(__file__).resolve().parents[1]


def write(path: Path, data: object) -> Path:
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_the_shipped_configuration_loads_and_points_at_the_sample_corpus() -> None:
    cfg = load_config(REPO / "corpus_config.yaml", env={})
    assert cfg.corpus_root() == REPO / "examples" / "curated-content"
    assert cfg.evaluation.fixture == REPO / "examples" / "retrieval-eval.json"
    assert cfg.build_dir == REPO / "build"
    assert cfg.effective_provider() == "local"
    assert set(cfg.evaluation.thresholds) == {"bm25", "hybrid"}


def test_a_bad_value_names_the_key_and_the_value(tmp_path: Path) -> None:
    config = write(tmp_path / "c.yaml", {"embedding": {"dimension": "lots"}})
    with pytest.raises(ConfigError) as err:
        load_config(config, env={})
    assert "embedding.dimension" in str(err.value) and "'lots'" in str(err.value)


def test_an_unknown_key_is_refused(tmp_path: Path) -> None:
    config = write(tmp_path / "c.yaml", {"retrieval": {"mdoe": "hybrid"}})
    with pytest.raises(ConfigError, match="retrieval.mdoe"):
        load_config(config, env={})


def test_an_environment_override_is_validated_and_named(tmp_path: Path) -> None:
    config = write(tmp_path / "c.yaml", {})
    with pytest.raises(ConfigError) as err:
        load_config(config, env={"RETRIEVAL_MODE": "fuzzy"})
    assert "retrieval.mode" in str(err.value) and "RETRIEVAL_MODE" in str(err.value)


def test_environment_overrides_use_the_agents_names(tmp_path: Path) -> None:
    config = write(tmp_path / "c.yaml", {"publish": {"s3": {"bucket": "from-file"}}})
    env = {
        "CURATED_CONTENT_PATH": str(tmp_path),
        "GEMINI_EMBEDDING_MODEL": "text-embedding-005",
        "GEMINI_EMBEDDING_DIM": "768",
        "RETRIEVAL_MODE": "lexical",
        "S3_BUCKET_NAME": "from-env",
        "AWS_S3_BUCKET": "second-choice",
        "AWS_REGION": "eu-west-3",
        "BRAIN_BUILD_DIR": str(tmp_path / "b"),
        "BRAIN_PUBLISH_ROOT": str(tmp_path / "agent"),
        "BRAIN_EVAL_FIXTURE": str(tmp_path / "f.json"),
    }
    cfg = load_config(config, env=env)
    assert cfg.corpus_root() == tmp_path
    assert cfg.embedding.model == "text-embedding-005"
    assert cfg.embedding.dimension == 768
    assert cfg.retrieval.mode == "lexical"
    assert cfg.publish.s3.bucket == "from-env"
    assert cfg.publish.s3.region == "eu-west-3"
    assert cfg.build_dir == tmp_path / "b"
    assert cfg.publish_root() == tmp_path / "agent"
    assert cfg.evaluation.fixture == tmp_path / "f.json"
    assert load_config(config, env={"AWS_S3_BUCKET": "alt"}).publish.s3.bucket == "alt"


def test_brain_config_names_the_file_and_relative_paths_follow_it(tmp_path: Path) -> None:
    (tmp_path / "corpus").mkdir()
    config = write(tmp_path / "custom.yaml", {"corpus": {"path": "corpus"}, "build_dir": "out"})
    cfg = load_config(env={"BRAIN_CONFIG": str(config)})
    assert cfg.corpus_root() == tmp_path / "corpus"
    assert cfg.build_dir == tmp_path / "out"
    with pytest.raises(ConfigError, match="not found"):
        load_config(env={"BRAIN_CONFIG": str(tmp_path / "missing.yaml")})


def test_first_existing_candidate_wins_when_no_path_is_set(tmp_path: Path) -> None:
    (tmp_path / "second").mkdir()
    config = write(tmp_path / "c.yaml", {"corpus": {"candidates": ["first", "second"]}})
    assert load_config(config, env={}).corpus_root() == tmp_path / "second"


def test_no_corpus_lists_every_candidate_and_how_to_set_one(tmp_path: Path) -> None:
    config = write(tmp_path / "c.yaml", {"corpus": {"candidates": ["nope-a", "nope-b"]}})
    with pytest.raises(CorpusNotFoundError) as err:
        load_config(config, env={}).corpus_root()
    message = str(err.value)
    assert str(tmp_path / "nope-a") in message and str(tmp_path / "nope-b") in message
    assert "CURATED_CONTENT_PATH" in message


def test_default_candidates_are_the_agents_siblings(tmp_path: Path) -> None:
    config = write(tmp_path / "c.yaml", {})
    cfg = load_config(config, env={})
    assert cfg.corpus_candidates() == [
        (tmp_path / "../patb-rag-curated-content").resolve(),
        (tmp_path / "../agent-project/patb-rag-curated-content").resolve(),
    ]


def test_provider_auto_and_the_key_never_in_the_dumped_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = write(tmp_path / "c.yaml", {})
    assert load_config(config, env={}).effective_provider() == "local"
    monkeypatch.setenv("GOOGLE_API_KEY", "sekret-google-key-123")
    cfg = load_config(config)
    assert cfg.effective_provider() == "gemini"
    assert cfg.gemini_api_key() == "sekret-google-key-123"
    monkeypatch.setenv("GEMINI_API_KEY", "sekret-gemini-key-456")
    assert cfg.gemini_api_key() == "sekret-gemini-key-456"
    assert "sekret" not in repr(cfg) and "sekret" not in str(cfg.redacted())


def test_schedule_settings_are_checked(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="schedule.cron"):
        load_config(write(tmp_path / "a.yaml", {"schedule": {"cron": "every night"}}), env={})
    with pytest.raises(ConfigError, match="schedule.timezone"):
        load_config(write(tmp_path / "b.yaml", {"schedule": {"timezone": "Mars/Olympus"}}), env={})


def test_instance_home_is_created_with_the_dialog_and_telemetry_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Recorded by monkeypatch, so the variable the helper sets is undone after the test.
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "elsewhere"))
    home = ensure_instance_home(tmp_path / "dh")
    settings = yaml.safe_load((home / "dagster.yaml").read_text())
    assert settings["telemetry"] == {"enabled": False} and settings["nux"] == {"enabled": False}
    assert os.environ["DAGSTER_HOME"] == str(home)
