"""corpus_config.yaml + environment: validation, overrides, corpus resolution, secrets."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from brain_pipeline.config import (
    ConfigError,
    CorpusNotFoundError,
    check_cron,
    load_config,
)
from brain_pipeline.lib.instance import ensure_instance_home

REPO = Path(__file__).resolve().parents[1]


def write(path: Path, data: object) -> Path:
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_the_shipped_configuration_loads_and_points_at_the_sample_corpus() -> None:
    cfg = load_config(REPO / "corpus_config.yaml", env={})
    assert cfg.corpus_root() == REPO / "examples" / "curated-content"
    assert cfg.evaluation.fixture == REPO / "examples" / "retrieval-eval.json"
    assert cfg.build_dir == REPO / "build"
    assert cfg.effective_provider() == "none"  # auto without a key: lexical
    assert set(cfg.evaluation.thresholds) == {"bm25", "hybrid"}


def test_a_bad_value_names_the_key_and_the_problem_not_the_value(tmp_path: Path) -> None:
    config = write(tmp_path / "c.yaml", {"embedding": {"dimension": "lots"}})
    with pytest.raises(ConfigError) as err:
        load_config(config, env={})
    assert str(err.value) == (
        f"invalid configuration in {config}: embedding.dimension: Input should be a valid "
        "integer, unable to parse string as an integer"
    )


def test_an_unknown_key_is_refused(tmp_path: Path) -> None:
    config = write(tmp_path / "c.yaml", {"retrieval": {"mdoe": "hybrid"}})
    with pytest.raises(ConfigError, match="retrieval.mdoe"):
        load_config(config, env={})


def test_the_removed_local_model_key_reads_as_before_when_it_names_the_one_model(
    tmp_path: Path,
) -> None:
    """Files written before `embedding.local_model` was removed still load; a name of a
    model that never existed is refused in one line that says to delete it."""
    kept = write(tmp_path / "a.yaml", {"embedding": {"provider": "local",
                                                    "local_model": "all-MiniLM-L6-v2-int8"}})
    cfg = load_config(kept, env={})
    assert cfg.effective_model() == "all-MiniLM-L6-v2-int8"
    assert not hasattr(cfg.embedding, "local_model")
    other = write(tmp_path / "b.yaml", {"embedding": {"local_model": "bge-large"}})
    with pytest.raises(ConfigError) as err:
        load_config(other, env={})
    message = str(err.value)
    assert "\n" not in message and "local_model was removed" in message
    assert "delete the line" in message and "bge-large" not in message


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
    assert cfg.corpus.candidates == [
        (tmp_path / "../patb-rag-curated-content").resolve(),
        (tmp_path / "../agent-project/patb-rag-curated-content").resolve(),
    ]


def test_provider_auto_and_the_key_never_in_the_dumped_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = write(tmp_path / "c.yaml", {})
    assert load_config(config, env={}).effective_provider() == "none"
    monkeypatch.setenv("GOOGLE_API_KEY", "sekret-google-key-123")
    cfg = load_config(config)
    assert cfg.effective_provider() == "gemini"
    assert cfg.gemini_api_key() == "sekret-google-key-123"
    monkeypatch.setenv("GEMINI_API_KEY", "sekret-gemini-key-456")
    assert cfg.gemini_api_key() == "sekret-gemini-key-456"
    assert "sekret" not in repr(cfg) and "sekret" not in str(cfg.model_dump(mode="json"))


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


# ---- cron: checked without Dagster, one line -------------------------------------


@pytest.mark.parametrize(
    "expression",
    [
        "0 3 * * *",
        "*/15 8-18 * * MON-FRI",
        "0 0 1 JAN,jul *",
        "5/20 1,13 * * *",
        "0 0 29 2 *",  # fires in leap years
        "0 0 L 4 *",
        "0 0 ? * 5#2",
        "0 0 * * 7",  # 7 is Sunday too
        "0 3 31 2,3 *",  # March 31 exists
        "0 3 30 4 MON",  # day of month OR day of week: every Monday of April
    ],
)
def test_usable_cron_expressions_pass(expression: str) -> None:
    check_cron(expression)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("99 99 * * *", "minute 99 is out of range 0-59"),
        ("0 24 * * *", "hour 24 is out of range 0-23"),
        ("0 0 0 * *", "day of month 0 is out of range 1-31"),
        ("0 0 * 13 *", "month 13 is out of range 1-12"),
        ("0 0 * * 8", "day of week 8 is out of range 0-7"),
        ("0 0 * * FUN", "day of week 'FUN' is not a number or a name such as SUN"),
        ("*/0 * * * *", "minute step '0' in '*/0' is not a positive number"),
        ("0 5-1 * * *", "hour range '5-1' runs backwards"),
        ("0 0,,1 * * *", "empty hour in '0,,1'"),
        ("0 3 31 2 *", "never fires: February has no day 31"),
        ("0 3 30,31 2 *", "never fires: February has no day 30, 31"),
        ("0 0 31 4,6,9,11 *", "never fires: April, June, September, November have no day 31"),
        ("0 3 31 2 MON", "February 31 is refused by Dagster, even with a day of week"),
        ("0 3 * *", "five fields"),
    ],
)
def test_unusable_cron_expressions_say_why(expression: str, message: str) -> None:
    with pytest.raises(ValueError) as err:
        check_cron(expression)
    assert str(err.value) == message or (message == "five fields" and message in str(err.value))


def test_a_bad_cron_is_one_config_error_line_naming_key_and_problem(tmp_path: Path) -> None:
    config = write(tmp_path / "c.yaml", {"schedule": {"cron": "0 3 31 2 *"}})
    with pytest.raises(ConfigError) as err:
        load_config(config, env={})
    assert str(err.value) == (
        f"invalid configuration in {config}: schedule.cron: never fires: "
        "February has no day 31"
    )


def test_the_cron_check_agrees_with_dagster_on_what_it_accepts() -> None:
    from dagster._utils.schedules import is_valid_cron_string  # the tests may import Dagster

    from brain_pipeline.config import check_cron

    def ours(expression: str) -> bool:
        try:
            check_cron(expression)
        except ValueError:
            return False
        return True

    accepted = ["0 3 * * *", "*/15 8-18 * * MON-FRI", "0 0 1 JAN,jul *", "0 0 ? * 5#2"]
    refused = ["99 99 * * *", "0 3 31 2 *", "0 3 31 2 MON", "*/0 * * * *", "0 0 * * 8"]
    for expression in accepted + refused:
        assert ours(expression) == is_valid_cron_string(expression), expression
    assert all(ours(c) for c in accepted) and not any(ours(c) for c in refused)


def test_the_configuration_module_does_not_import_dagster() -> None:
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "from brain_pipeline.config import load_config\n"
        "load_config(env={}).ingest_limits()\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'dagster'))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=REPO
    )
    assert done.stdout.strip() == "[]"


# ---- unreadable configuration files: one line -------------------------------------


def test_a_directory_or_non_text_file_is_one_config_error_line(tmp_path: Path) -> None:
    folder = tmp_path / "conf.d"
    folder.mkdir()
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"\x7fELF\x02\x01\x01\x00\xff\xfe")
    garbled = tmp_path / "garbled.yaml"
    garbled.write_bytes(b"a: [1,\n  b: {")
    expected = {
        folder: f"configuration file {folder} is a directory",
        binary: f"configuration file {binary} is not UTF-8 text (byte 0xff at offset 8)",
        garbled: f"{garbled}: not valid YAML: ",
    }
    for path, start in expected.items():
        with pytest.raises(ConfigError) as err:
            load_config(env={"BRAIN_CONFIG": str(path)})
        assert str(err.value).startswith(start)
        assert "\n" not in str(err.value)


# ---- junk limits ---------------------------------------------------------------------


def test_junk_limits_come_from_the_corpus_section(tmp_path: Path) -> None:
    default = load_config(write(tmp_path / "a.yaml", {}), env={}).ingest_limits()
    assert (default.max_file_bytes, default.max_paragraph_chars) == (10_000_000, 20_000)
    config = write(
        tmp_path / "b.yaml", {"corpus": {"max_file_bytes": 4096, "max_paragraph_chars": 500}}
    )
    limits = load_config(config, env={}).ingest_limits()
    assert (limits.max_file_bytes, limits.max_paragraph_chars) == (4096, 500)
    for key in ("max_file_bytes", "max_paragraph_chars"):
        bad = write(tmp_path / f"{key}.yaml", {"corpus": {key: 0}})
        with pytest.raises(ConfigError, match=f"corpus.{key}: Input should be greater than"):
            load_config(bad, env={})


@pytest.mark.parametrize(
    "url", ["hooks.example.com/services/T0K3N", "ftp://hooks.example.com/T0K3N", "https:///T0K3N"]
)
def test_a_webhook_url_that_is_not_http_is_refused_at_load_without_its_token(
    tmp_path: Path, url: str
) -> None:
    """Found by a newcomer's walk-through: a URL without its scheme loaded fine and only
    failed at the first notification, in a sensor tick nobody reads."""
    config = write(tmp_path / "c.yaml", {"notify": {"webhook_url": url}})
    with pytest.raises(ConfigError) as err:
        load_config(config, env={})
    assert "notify.webhook_url" in str(err.value) and "http" in str(err.value)
    assert "T0K3N" not in str(err.value)
    with pytest.raises(ConfigError) as from_env:
        load_config(write(tmp_path / "d.yaml", {}), env={"BRAIN_NOTIFY_WEBHOOK_URL": url})
    assert "T0K3N" not in str(from_env.value)


def test_an_http_webhook_url_is_kept() -> None:
    cfg = load_config(REPO / "corpus_config.yaml", env={
        "BRAIN_NOTIFY_WEBHOOK_URL": " https://hooks.example.com/services/T0K3N ",
        "BRAIN_UI_BASE_URL": "http://dagster.internal:3000",
    })
    assert cfg.notify.webhook_url == "https://hooks.example.com/services/T0K3N"
    assert cfg.notify.ui_base_url == "http://dagster.internal:3000" and cfg.notify.configured


SECRET = "SECRETXYZ-hooks-token-9d1f"
EMAIL = {"host": "smtp.example", "sender": "a@example", "recipients": ["b@example"]}
SECRET_PLACES: dict[str, tuple[dict[str, Any], str]] = {
    "webhook-under-a-mistyped-key": (
        {"notify": {"webhook": f"https://hooks.example/services/T0/B0/{SECRET}"}},
        "notify.webhook: Extra inputs are not permitted",
    ),
    "password-under-a-mistyped-key": (
        {"notify": {"email": {**EMAIL, "password": SECRET}}},
        "notify.email.password: Extra inputs are not permitted",
    ),
    "password-given-where-its-variable-name-belongs": (
        {"notify": {"email": {**EMAIL, "password_env": {"value": SECRET}}}},
        "notify.email.password_env: Input should be a valid string",
    ),
    "secret-as-a-port": (
        {"notify": {"email": {**EMAIL, "port": SECRET}}},
        "notify.email.port: Input should be a valid integer",
    ),
    "secret-as-a-list": (
        {"notify": {"email": {**EMAIL, "recipients": SECRET}}},
        "notify.email.recipients: Input should be a valid list",
    ),
    "secret-as-a-time-zone": (
        {"schedule": {"timezone": SECRET}},
        "schedule.timezone: unknown time zone (value not shown)",
    ),
    "secret-as-a-webhook-url": (
        {"notify": {"webhook_url": SECRET}},
        "notify.webhook_url: must be an http:// or https:// URL",
    ),
}


@pytest.mark.parametrize("place", SECRET_PLACES, ids=list(SECRET_PLACES))
def test_a_configuration_error_names_the_key_never_the_value(place: str, tmp_path: Path) -> None:
    settings, expected = SECRET_PLACES[place]
    config = write(tmp_path / "c.yaml", settings)
    with pytest.raises(ConfigError) as err:
        load_config(config, env={})
    message = str(err.value)
    assert expected in message and "\n" not in message
    assert SECRET not in message and "SECRETXYZ" not in message


# ---- state.ledger and state.blobs (issue 41's foundation) --------------------------


def test_the_ledger_and_blobs_default_to_the_build_directorys_state(tmp_path: Path) -> None:
    from brain_pipeline.config import memory_of
    from brain_pipeline.state.blobs import LocalBlobs

    cfg = load_config(write(tmp_path / "c.yaml", {"build_dir": "b"}), env={})
    state = tmp_path / "b" / "state"
    assert cfg.ledger_url() == f"sqlite:///{state / 'ledger.sqlite'}"
    assert cfg.blobs_url() == str(state / "blobs")
    memory = memory_of(cfg)
    assert memory.ledger.backend == "sqlite" and memory.ledger.pointer("live") is None
    assert (state / "ledger.sqlite").is_file()
    blobs = memory.blobs
    assert isinstance(blobs, LocalBlobs) and blobs.root == state / "blobs"


def test_state_urls_from_the_file_and_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = write(
        tmp_path / "c.yaml",
        {"state": {"ledger": "sqlite:///rel/ledger.sqlite", "blobs": "rel/blobs"}},
    )
    cfg = load_config(config, env={})  # relative to the file's folder
    assert cfg.ledger_url() == f"sqlite:///{tmp_path / 'rel' / 'ledger.sqlite'}"
    assert cfg.blobs_url() == str(tmp_path / "rel" / "blobs")
    monkeypatch.chdir(tmp_path / "..")
    env = {
        "BRAIN_STATE_LEDGER": "postgresql://brain@db.internal:5432/brain",
        "BRAIN_STATE_BLOBS": "s3://team-bucket/brain/state",
    }
    cfg = load_config(config, env=env)
    assert cfg.ledger_url() == "postgresql://brain@db.internal:5432/brain"
    assert cfg.blobs_url() == "s3://team-bucket/brain/state"
    cfg = load_config(config, env={"BRAIN_STATE_BLOBS": "here"})  # relative to the cwd
    assert cfg.blobs_url() == str((tmp_path / ".." / "here").resolve())


def test_s3_blobs_take_the_publications_endpoint_and_region(tmp_path: Path) -> None:
    from brain_pipeline.config import memory_of
    from brain_pipeline.state.blobs import S3Blobs

    settings = {
        "state": {"blobs": "s3://team-bucket/brain"},
        "publish": {"s3": {"region": "eu-west-1", "endpoint_url": "http://127.0.0.1:9"}},
    }
    blobs = memory_of(load_config(write(tmp_path / "c.yaml", settings), env={})).blobs
    assert isinstance(blobs, S3Blobs) and (blobs.bucket, blobs.prefix) == ("team-bucket", "brain/")
    assert blobs.client.meta.region_name == "eu-west-1"
    assert blobs.client.meta.endpoint_url == "http://127.0.0.1:9"


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        ("ledger", "mysql://root:hunter2@db/brain", "use sqlite:///<path> or postgresql://"),
        ("ledger", "postgresql:///brain", "needs a host"),
        ("blobs", "gs://bucket/brain", "use a folder or s3://bucket/prefix"),
    ],
)
def test_a_bad_state_url_is_one_line_saying_what_to_write(
    tmp_path: Path, key: str, value: str, says: str
) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path / "c.yaml", {"state": {key: value}}), env={})
    message = str(err.value)
    assert f"state.{key}:" in message and says in message
    assert "\n" not in message and "hunter2" not in message
