"""Settings: `corpus_config.yaml` plus environment overrides, validated with pydantic.

The YAML file is the one place a user edits. Environment variables override it with the
names the agent already uses (CURATED_CONTENT_PATH, GEMINI_EMBEDDING_MODEL, ...), plus
BRAIN_* variables that make the pipeline scriptable. Relative paths in the file are
resolved against the file's folder (so the pipeline behaves the same from any working
directory); relative paths in the environment against the working directory.

Secrets (Gemini and AWS keys) are read from the environment only, are never part of the
validated model's repr, and are only handed to the client that needs them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from brain_pipeline.corpus.discovery import CorpusNotFoundError
from brain_pipeline.state.layout import StateLayout

if TYPE_CHECKING:
    from brain_pipeline.corpus.junk import IngestLimits
    from brain_pipeline.state.memory import Memory

DEFAULT_CONFIG_NAME = "corpus_config.yaml"
DEFAULT_CANDIDATES = ("../patb-rag-curated-content", "../agent-project/patb-rag-curated-content")
#: The local provider's one model (the `[local]` extra ships it): the name its vectors carry.
LOCAL_MODEL_NAME = "all-MiniLM-L6-v2-int8"


class ConfigError(ValueError):
    """The configuration file or an override is invalid; the message names key and value."""


# ---- cron ------------------------------------------------------------------------
# Checked here, without Dagster, so a bad `schedule.cron` is one ConfigError line before
# any run or UI starts (Dagster's own check is a 30-line DagsterInvalidDefinitionError,
# and an expression that never fires is not caught at all except Feb 30/31).

_MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_MONTH_NAMES = {name: number for number, name in enumerate(_MONTHS, start=1)}
_DAY_NAMES = {name: n for n, name in enumerate(("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"))}
#: Longest each month gets (29 for February: a day that occurs in leap years does fire).
_MONTH_DAYS = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
_MONTH_TITLES = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)  # fmt: skip
#: (name, lowest, highest, names) of the five fields, in order.
_CRON_FIELDS: tuple[tuple[str, int, int, Mapping[str, int]], ...] = (
    ("minute", 0, 59, {}),
    ("hour", 0, 23, {}),
    ("day of month", 1, 31, {}),
    ("month", 1, 12, _MONTH_NAMES),
    ("day of week", 0, 7, _DAY_NAMES),
)


def _cron_value(text: str, name: str, low: int, high: int, names: Mapping[str, int]) -> int:
    value = names.get(text.upper()) if names else None
    if value is None:
        if not text.isdigit():
            known = f" or a name such as {next(iter(names))}" if names else ""
            raise ValueError(f"{name} {text!r} is not a number{known}")
        value = int(text)
    if not low <= value <= high:
        raise ValueError(f"{name} {value} is out of range {low}-{high}")
    return value


def _cron_field(text: str, index: int) -> frozenset[int]:
    """The values one field allows: `*`, `n`, `a-b`, any of them `/step`, comma lists."""
    name, low, high, names = _CRON_FIELDS[index]
    values: set[int] = set()
    for part in text.split(","):
        base, slash, step_text = part.partition("/")
        step = 1
        if slash:
            if not step_text.isdigit() or int(step_text) == 0:
                raise ValueError(f"{name} step {step_text!r} in {part!r} is not a positive number")
            step = int(step_text)
        if base in ("*", "?") and (base == "*" or index in (2, 4)):
            start, end = low, high
        elif base == "L" and index == 2:
            values.add(28)  # the last day: every month has one (28 stands for it)
            continue
        elif "#" in base and index == 4 and not slash:
            day, _, nth = base.partition("#")
            values.add(_cron_value(day, name, low, high, names))
            if not (nth.isdigit() and 1 <= int(nth) <= 5):
                raise ValueError(f"{name} {base!r}: the week after # must be 1-5")
            continue
        elif "-" in base:
            first, _, last = base.partition("-")
            start = _cron_value(first, name, low, high, names)
            end = _cron_value(last, name, low, high, names)
            if start > end:
                raise ValueError(f"{name} range {base!r} runs backwards")
        elif base:
            start = _cron_value(base, name, low, high, names)
            end = high if slash else start
        else:
            raise ValueError(f"empty {name} in {text!r}")
        values.update(range(start, end + 1, step))
    return frozenset(values)


def cron_fields(expression: str) -> list[frozenset[int]]:
    """The values each of the five fields allows (ValueError naming a bad field)."""
    fields = expression.split()
    if len(fields) != 5:
        raise ValueError("a cron expression has five fields, e.g. '0 3 * * *'")
    return [_cron_field(text, index) for index, text in enumerate(fields)]


def check_cron(expression: str) -> None:
    """Raise ValueError naming the problem when `expression` is not a usable 5-field cron.

    Fields: minute, hour, day of month, month, day of week (0-7, 7 = Sunday), with
    `*`, numbers, names (JAN-DEC, SUN-SAT), ranges, lists and steps; also `?` and the
    `L` / `#` forms Dagster's cron library accepts. Refused as well: an expression that
    never fires (day 31 in April only, February 30...). When both day of month and day
    of week are restricted, cron fires on either, so such a pair always fires; Dagster
    still refuses a single February 30 or 31 then, and so does this check.
    """
    parsed = cron_fields(expression)
    fields = expression.split()
    days, months = parsed[2], parsed[3]
    february_only_end = months == {2} and days in ({30}, {31})
    day_or_week = fields[2][0] not in "*?" and fields[4][0] not in "*?"
    if february_only_end and day_or_week:
        raise ValueError(f"February {min(days)} is refused by Dagster, even with a day of week")
    if day_or_week:
        return  # cron's OR: the day-of-week half fires every week
    if any(day <= _MONTH_DAYS[month - 1] for month in months for day in days):
        return
    month_text = ", ".join(_MONTH_TITLES[m - 1] for m in sorted(months))
    day_text = ", ".join(str(d) for d in sorted(days))
    verb = "has" if len(months) == 1 else "have"
    raise ValueError(f"never fires: {month_text} {verb} no day {day_text}")


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class CorpusSettings(_Section):
    path: Path | None = None
    candidates: list[Path] = Field(default_factory=lambda: [Path(p) for p in DEFAULT_CANDIDATES])
    # Junk limits (see corpus/junk.py): larger files are skipped unread, longer
    # paragraphs are kept and reported. Defaults mirror corpus.junk's.
    max_file_bytes: int = Field(default=10_000_000, ge=1)
    max_paragraph_chars: int = Field(default=20_000, ge=1)


class EmbeddingSettings(_Section):
    provider: Literal["auto", "gemini", "local", "none"] = "auto"
    model: str = "gemini-embedding-001"
    dimension: int = Field(default=256, ge=1, le=3072)
    texts_per_minute: int = Field(default=3000, ge=1)
    requests_per_minute: int = Field(default=3000, ge=1)
    batch_size: int = Field(default=100, ge=1, le=100)
    max_attempts: int = Field(default=6, ge=1, le=50)
    too_long: Literal["truncate", "skip"] = "truncate"
    """A text the service refuses as over its input limit (every text is sent whole
    first; embedding.limits): embed a head cut in proportion to the service's own token
    count (`truncate`), or give it no vector so it stays lexical (`skip`)."""

    @model_validator(mode="before")
    @classmethod
    def _removed_local_model(cls, data: Any) -> Any:
        """`local_model` is gone: the local provider has one model, so the key could only
        relabel what it made. A file that still names that model reads as before; any
        other name never worked (the factory refused it) and is refused here, by name."""
        if not isinstance(data, dict) or "local_model" not in data:
            return data
        data = dict(data)
        name = data.pop("local_model")
        if name != LOCAL_MODEL_NAME:
            raise ValueError(
                f"local_model was removed (the local provider has one model, "
                f"{LOCAL_MODEL_NAME}); delete the line"
            )
        return data


class RetrievalSettings(_Section):
    mode: Literal["hybrid", "lexical"] = "hybrid"


class Thresholds(_Section):
    min_ndcg_at_10: float | None = Field(default=None, ge=0.0, le=1.0)
    min_recall_at_10: float | None = Field(default=None, ge=0.0, le=1.0)
    max_misses: int | None = Field(default=None, ge=0)


class KnownItemSettings(_Section):
    """The known-item check (evaluation/known_items.py): what the agent found at the last
    publication, asked again of each build. Needs no labels."""

    sample_per_area: int = Field(default=40, ge=1, le=2000)
    """Known items asked per area (a stable sample by id hash)."""
    max_found_drop: float = Field(default=0.10, ge=0.0, le=1.0)
    """found@10 may fall by this much in an area before it blocks (and only when the
    paired bootstrap interval of the drop excludes zero)."""
    max_area_loss: float = Field(default=0.25, ge=0.0, le=1.0)
    """Share of an area's chunks that may disappear before it blocks."""


class EvaluationSettings(_Section):
    fixture: Path = Path("examples/retrieval-eval.json")
    known_items: KnownItemSettings = Field(default_factory=KnownItemSettings)
    thresholds: dict[Literal["legacy", "bm25", "hybrid"], Thresholds] = Field(default_factory=dict)
    on_regression: Literal["block", "warn"] = "block"
    """A query the agent's retriever answered at the last publication and misses now:
    `block` fails the blocking check (nothing is published), `warn` publishes with a WARN
    naming it. Accepting a regression is `brain-pipeline eval --accept --note ...`."""


class S3Settings(_Section):
    bucket: str | None = None
    prefix: str = ""
    region: str | None = None
    endpoint_url: str | None = None
    include_embeddings: bool = False
    # A silent endpoint (accepts connections, never answers) must fail within a minute.
    connect_timeout_seconds: float = Field(default=5.0, gt=0, le=300)
    read_timeout_seconds: float = Field(default=20.0, gt=0, le=3600)
    deadline_seconds: float = Field(default=60.0, gt=0, le=86400)
    # What S3 is asked to do with the bytes, and whose bucket it must be (every request).
    server_side_encryption: Literal["AES256", "aws:kms"] | None = None
    kms_key_id: str | None = None
    expected_bucket_owner: str | None = Field(default=None, pattern=r"^[0-9]{12}$")

    @model_validator(mode="after")
    def _kms_key_needs_kms(self) -> S3Settings:
        """A key id with any other encryption would be silently ignored by S3: refuse it."""
        if self.kms_key_id and self.server_side_encryption != "aws:kms":
            raise ValueError("kms_key_id needs server_side_encryption: aws:kms")
        return self

    @field_validator("prefix")
    @classmethod
    def _prefix_is_a_folder(cls, value: str) -> str:
        value = value.strip("/")
        return f"{value}/" if value else ""


class PublishSettings(_Section):
    root: Path | None = None
    agent_query_model: str = "gemini-embedding-001"
    force: bool = False
    """Refused when true: a standing force would publish every failed build without anyone
    answering for it. Force one publication instead (`materialize --force-publish --reason`)."""
    allow_force: bool = True
    """False: every launch path (CLI, UI Launchpad, schedule, re-execution, rollback to a
    forced publication) refuses force. Open-source Dagster has no authentication, so a
    deployment whose UI others can reach should set it false."""
    agent_string_limit: int | None = Field(default=None, ge=1)
    """Longest string the agent's Node.js loader can read, in UTF-16 code units; None:
    the agent's own limit (`corpus.agent_limits.NODE_MAX_STRING_UNITS`, V8's maximum on
    64-bit builds, read when the check runs). `fits_agent_string_limit` blocks a larger
    store. Lower it to keep headroom."""
    keep_generations: int = Field(default=8, ge=1, le=1000)
    """Publications a rollback can reach: their local copies (state/published/) and their
    S3 objects are kept. 8 = a week of nightly runs plus the live one."""
    s3: S3Settings = Field(default_factory=S3Settings)

    @field_validator("force")
    @classmethod
    def _no_standing_force(cls, value: bool) -> bool:
        """Force is one recorded act with a reason, never a setting that forces every run."""
        if value:
            raise ValueError(
                "a standing force is no longer honoured: remove it and force one publication "
                'with `brain-pipeline materialize --force-publish --reason "..."`'
            )
        return value


class ScheduleSettings(_Section):
    cron: str = "0 3 * * *"
    timezone: str = "UTC"
    enabled: bool = True
    sensor_enabled: bool = False
    sensor_min_interval_seconds: int = Field(default=60, ge=5)

    @field_validator("cron")
    @classmethod
    def _valid_cron(cls, value: str) -> str:
        check_cron(value)
        return value

    @field_validator("timezone")
    @classmethod
    def _known_timezone(cls, value: str) -> str:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f"unknown time zone {value!r}") from exc
        return value


class LockSettings(_Section):
    # How long a run waits for another run on the same build directory or publish root
    # before failing with the holder's pid, run id and host. Ten minutes covers a typical
    # run over the curated corpus (a nightly schedule colliding with a manual run waits
    # it out); 0 fails at once. BRAIN_LOCK_WAIT_SECONDS.
    wait_seconds: float = Field(default=600.0, ge=0.0)


class StateSettings(_Section):
    """Where the ledger and the blobs live (issue 41); every step reaches them through
    `memory_of`. Unset: inside the build directory's `state/`."""

    ledger: str | None = None
    """`sqlite:///<path>` or `postgresql://user@host:5432/db`; the password comes from
    PGPASSWORD or ~/.pgpass, never from here (logs show `redacted(url)`)."""
    blobs: str | None = None
    """A folder or `s3://bucket/prefix` (endpoint and region: `publish.s3`'s)."""

    # The state modules are imported only where used: every command loads this module.

    @field_validator("ledger", "blobs")
    @classmethod
    def _state_url(cls, value: str | None, info: ValidationInfo) -> str | None:
        from brain_pipeline.state.blobs import check_blobs_url
        from brain_pipeline.state.ledger import check_ledger_url

        if not value or not value.strip():
            return None
        check = check_ledger_url if info.field_name == "ledger" else check_blobs_url
        return check(value.strip())


class EmailSettings(_Section):
    """SMTP delivery. Credentials are named, never given: `username_env`/`password_env`
    are the names of environment variables holding them (read when a message is sent)."""

    host: str
    port: int = Field(default=587, ge=1, le=65535)
    starttls: bool = True
    sender: str
    recipients: list[str] = Field(min_length=1)
    username_env: str | None = None
    password_env: str | None = None


class NotifySettings(_Section):
    """Where a blocked publish, a failed run, a WARN publish and a recovery are reported.
    No channel configured: the notification sensors are stopped."""

    webhook_url: str | None = None
    """JSON POST; its `text` field is what a Slack or Teams incoming webhook shows. The
    URL often holds a token: it is never printed (errors name its host only)."""
    email: EmailSettings | None = None
    ui_base_url: str | None = None
    """The Dagster UI's address (e.g. http://dagster.internal:3000): messages link the run."""
    timeout_seconds: float = Field(default=5.0, gt=0, le=60)
    max_attempts: int = Field(default=3, ge=1, le=5)
    """Quick attempts per channel in one try (1 s, 2 s, ... apart)."""
    retry_backoff_seconds: float = Field(default=60.0, gt=0, le=3600)
    """A message no channel accepted is tried again this long after, the wait doubling
    after each failed try (at most an hour): by the `notify_retry` sensor while the
    daemon runs, and by the next `brain-pipeline materialize`."""
    retry_for_seconds: float = Field(default=86400.0, gt=0, le=7 * 86400)
    """How long a message is tried again before it is given up (`failed`: named in the
    run's log and in `brain-pipeline status`)."""

    @field_validator("webhook_url", "ui_base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        """Refused at load, not at the first failed run's tick: a URL without its scheme
        would only fail later, where nobody reads it. The value is never echoed (a
        webhook URL holds its token)."""
        if value is None or not value.strip():
            return None
        from urllib.parse import urlsplit

        parts = urlsplit(value.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("must be an http:// or https:// URL with a host (value not shown)")
        return value.strip()

    @property
    def configured(self) -> bool:
        return bool(self.webhook_url) or self.email is not None


class BrainConfig(_Section):
    """The validated configuration. Paths are absolute once `load_config` returns it."""

    config_path: Path | None = None
    corpus: CorpusSettings = Field(default_factory=CorpusSettings)
    build_dir: Path = Path("build")
    dagster_home: Path | None = None
    embedding: EmbeddingSettings = Field(default_factory=EmbeddingSettings)
    retrieval: RetrievalSettings = Field(default_factory=RetrievalSettings)
    evaluation: EvaluationSettings = Field(default_factory=EvaluationSettings)
    publish: PublishSettings = Field(default_factory=PublishSettings)
    schedule: ScheduleSettings = Field(default_factory=ScheduleSettings)
    locks: LockSettings = Field(default_factory=LockSettings)
    notify: NotifySettings = Field(default_factory=NotifySettings)
    state: StateSettings = Field(default_factory=StateSettings)

    # ---- derived values -------------------------------------------------------------
    @property
    def base_dir(self) -> Path:
        """Folder that relative paths in the file refer to."""
        return self.config_path.parent if self.config_path else Path.cwd()

    def corpus_found(self) -> Path | None:
        """`corpus.path` (whether or not it exists), else the first candidate that is a
        folder: what a run would read, before asking whether it can."""
        if self.corpus.path is not None:
            return self.corpus.path
        return next((c for c in self.corpus.candidates if c.is_dir()), None)

    def corpus_root(self) -> Path:
        """The configured corpus path, else the first existing candidate; else
        CorpusNotFoundError, one line saying what to set (the preflight's line too)."""
        path = self.corpus_found()
        if path is None:
            tried = ", ".join(str(c) for c in self.corpus.candidates) or "nothing"
            raise CorpusNotFoundError(
                f"no corpus found (tried {tried}); set CURATED_CONTENT_PATH=/path/to/corpus "
                f"or corpus.path in {self.config_path or DEFAULT_CONFIG_NAME}"
            )
        if not path.is_dir():
            raise CorpusNotFoundError(
                f"corpus path {path} (corpus.path / CURATED_CONTENT_PATH) is not a directory"
            )
        return path

    def ingest_limits(self) -> IngestLimits:
        """The junk thresholds the ingest applies (`corpus.max_file_bytes`, ...)."""
        from brain_pipeline.corpus.junk import IngestLimits

        return IngestLimits(self.corpus.max_file_bytes, self.corpus.max_paragraph_chars)

    def gemini_api_key(self) -> str | None:
        """GEMINI_API_KEY, else GOOGLE_API_KEY; never logged, never stored in metadata."""
        name = gemini_key_variable()
        return os.environ[name].strip() if name else None

    def effective_provider(self) -> Literal["gemini", "local", "none"]:
        """Resolve `auto`: Gemini when a key is set, no vectors otherwise.

        The agent embeds its queries with Gemini, so vectors from the local model are
        never published: without a key they would only feed a hybrid figure that
        describes no retriever the agent runs, at minutes per ten thousand chunks. Like
        the original ingest, `auto` without a key builds the store alone (and evaluates
        it lexically); `local` stays a deliberate choice for offline hybrid experiments.
        """
        if self.embedding.provider == "auto":
            return "gemini" if self.gemini_api_key() else "none"
        return self.embedding.provider

    def provider_label(self) -> str:
        """The provider as a person should read it: `auto` says what it resolved to, and
        no vectors says that retrieval is lexical."""
        provider = self.effective_provider()
        if self.embedding.provider == "auto":
            if provider == "gemini":
                return f"gemini {self.embedding.model} (auto: a Gemini key is set)"
            return "none, lexical only (auto: no Gemini key; set GEMINI_API_KEY for vectors)"
        if provider == "gemini":
            return f"gemini {self.embedding.model}"
        if provider == "local":
            return f"local {LOCAL_MODEL_NAME} (offline; its vectors are not published)"
        return "none, lexical only"

    def effective_model(self) -> str:
        """The embedding model name that vectors built now will carry."""
        provider = self.effective_provider()
        if provider == "gemini":
            return self.embedding.model
        if provider == "local":
            return LOCAL_MODEL_NAME
        return ""

    def publish_root(self) -> Path:
        """Where published artifacts go; defaults to <build_dir>/agent when unset."""
        return self.publish.root if self.publish.root is not None else self.build_dir / "agent"

    @property
    def layout(self) -> StateLayout:
        """The build directory's paths: the one place they are derived from the settings
        (steps take them from `memory_of(cfg).layout`, which is this)."""
        return StateLayout.of(self.build_dir)

    def ledger_url(self) -> str:
        """`state.ledger`, else the SQLite file in the build directory's state folder."""
        from brain_pipeline.state.ledger import sqlite_url

        return self.state.ledger or sqlite_url(self.layout.ledger)

    def blobs_url(self) -> str:
        """`state.blobs`, else the blob folder in the build directory's state folder."""
        return self.state.blobs or str(self.layout.blobs_dir)

    def instance_home(self) -> Path:
        """The Dagster instance folder shared by the CLI and `dagster dev`."""
        env = os.environ.get("DAGSTER_HOME", "").strip()
        if env:
            return Path(env).expanduser().resolve()
        if self.dagster_home is not None:
            return self.dagster_home
        return self.base_dir / ".dagster_home"


# Where the Gemini key is read from, first set wins. Never a configuration key: a key in a
# file ends up in commits, and a key in Dagster config ends up in the run's metadata.
GEMINI_KEY_VARIABLES: tuple[str, ...] = ("GEMINI_API_KEY", "GOOGLE_API_KEY")


def gemini_key_variable() -> str | None:
    """The first of GEMINI_KEY_VARIABLES that is set: the key's value for the embedder,
    its name for the Dagster resource (which resolves it in the run's own process)."""
    return next((name for name in GEMINI_KEY_VARIABLES if os.environ.get(name, "").strip()), None)


# Environment variable -> dotted config key. Order matters where two names map to one key:
# the first one set wins.
ENV_OVERRIDES: tuple[tuple[str, str], ...] = (
    ("CURATED_CONTENT_PATH", "corpus.path"),
    ("BRAIN_BUILD_DIR", "build_dir"),
    ("BRAIN_PUBLISH_ROOT", "publish.root"),
    ("BRAIN_EVAL_FIXTURE", "evaluation.fixture"),
    ("BRAIN_EMBEDDING_PROVIDER", "embedding.provider"),
    ("GEMINI_EMBEDDING_MODEL", "embedding.model"),
    ("GEMINI_EMBEDDING_DIM", "embedding.dimension"),
    ("RETRIEVAL_MODE", "retrieval.mode"),
    ("S3_BUCKET_NAME", "publish.s3.bucket"),
    ("AWS_S3_BUCKET", "publish.s3.bucket"),
    ("AWS_REGION", "publish.s3.region"),
    ("AWS_ENDPOINT_URL_S3", "publish.s3.endpoint_url"),
    ("BRAIN_LOCK_WAIT_SECONDS", "locks.wait_seconds"),
    ("BRAIN_NOTIFY_WEBHOOK_URL", "notify.webhook_url"),
    ("BRAIN_UI_BASE_URL", "notify.ui_base_url"),
    ("BRAIN_STATE_LEDGER", "state.ledger"),
    ("BRAIN_STATE_BLOBS", "state.blobs"),
)


def _set_dotted(tree: dict[str, Any], dotted: str, value: Any) -> None:
    node = tree
    *parents, leaf = dotted.split(".")
    for part in parents:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[leaf] = value


def _read_yaml(path: Path) -> dict[str, Any]:
    """The file's mapping; every way it can be unusable is one ConfigError line."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError as exc:
        raise ConfigError(f"configuration file not found: {path} (set BRAIN_CONFIG)") from exc
    except IsADirectoryError:
        raise ConfigError(
            f"configuration file {path} is a directory; BRAIN_CONFIG must name a YAML file"
        ) from None
    except OSError as exc:
        raise ConfigError(
            f"configuration file {path} cannot be read: {exc.strerror or exc}"
        ) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"configuration file {path} is not UTF-8 text (byte 0x{raw[exc.start]:02x} at "
            f"offset {exc.start}); BRAIN_CONFIG must name a YAML file"
        ) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {_yaml_problem(exc)}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"{path}: the top level must be a mapping of keys, not {type(data).__name__}"
        )
    return data


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """PyYAML's multi-line message as one line: the problem and where it is."""
    problem = getattr(exc, "problem", None) or getattr(exc, "reason", None) or str(exc)
    mark = getattr(exc, "problem_mark", None)
    where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
    if mark is None and getattr(exc, "position", None) is not None:
        where = f" (offset {exc.position})"  # type: ignore[attr-defined]
    return " ".join(str(problem).split()) + where


VALUE_NOT_SHOWN = "(value not shown)"


def _format_validation_error(exc: ValidationError, source: str) -> str:
    """One line: every offending key and what is wrong with it, never the value given.

    A value is where a secret is when something is wrong: a webhook URL under a
    mistyped key still holds its token, a password pasted where its variable's name
    belongs is the password. So no value is repeated, whatever the key; a validator's
    message that quotes the whole value has it replaced too.
    """
    parts = []
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"])
        message = str(err["msg"]).removeprefix("Value error, ")
        parts.append(f"{key}: {_without_value(message, err.get('input'))}")
    return f"invalid configuration in {source}: " + "; ".join(parts)


def _without_value(message: str, value: Any) -> str:
    """`message` with any quotation of the string `value` replaced (a safety net for
    validators' own messages; pydantic's do not quote the input). Bare, only a value
    long enough not to be a word of the message itself."""
    if not isinstance(value, str) or not value.strip():
        return message
    message = message.replace(repr(value), VALUE_NOT_SHOWN)
    return message.replace(value, VALUE_NOT_SHOWN) if len(value) >= 8 else message


def _absolutise(cfg: BrainConfig, base: Path, env_paths: Mapping[str, Path]) -> BrainConfig:
    """Resolve relative paths: file values against `base`, environment values against cwd."""

    def fix(key: str, value: Path | None) -> Path | None:
        if value is None:
            return None
        value = value.expanduser()
        if value.is_absolute():
            return value
        root = Path.cwd() if key in env_paths else base
        return (root / value).resolve()

    cfg.corpus.path = fix("corpus.path", cfg.corpus.path)
    cfg.corpus.candidates = [fix("", c) or c for c in cfg.corpus.candidates]
    cfg.build_dir = fix("build_dir", cfg.build_dir) or cfg.build_dir
    cfg.dagster_home = fix("", cfg.dagster_home)
    cfg.publish.root = fix("publish.root", cfg.publish.root)
    cfg.evaluation.fixture = (
        fix("evaluation.fixture", cfg.evaluation.fixture) or cfg.evaluation.fixture
    )
    ledger, blobs = cfg.state.ledger, cfg.state.blobs
    if ledger and ledger.lower().startswith("sqlite:"):
        from brain_pipeline.state.ledger import sqlite_path, sqlite_url

        cfg.state.ledger = sqlite_url(fix("state.ledger", sqlite_path(ledger)) or "")
    if blobs and "://" not in blobs:
        cfg.state.blobs = str(fix("state.blobs", Path(blobs)))
    return cfg


def load_config(
    path: Path | str | None = None, env: Mapping[str, str] | None = None
) -> BrainConfig:
    """Load and validate the configuration, apply environment overrides, absolutise paths.

    `path` defaults to BRAIN_CONFIG, else ./corpus_config.yaml. A missing default file is
    not an error (built-in defaults apply); a missing explicit file is.
    """
    env = os.environ if env is None else env
    named = env.get("BRAIN_CONFIG", "").strip()
    explicit = path is not None or bool(named)
    given = path if path is not None else named or Path.cwd() / DEFAULT_CONFIG_NAME
    config_path = Path(given).expanduser().resolve()
    if config_path.exists() or explicit:
        data = _read_yaml(config_path)
        source = str(config_path)
    else:
        data, source = {}, "built-in defaults"
    overridden: dict[str, Path] = {}
    used: list[str] = []
    for var, key in ENV_OVERRIDES:
        value = env.get(var, "").strip()
        if not value or key in overridden:
            continue
        _set_dotted(data, key, value)
        overridden[key] = Path(value)
        used.append(var)
    if used:
        source = f"{source} with {', '.join(used)} from the environment"
    data["config_path"] = str(config_path) if config_path.exists() else None
    try:
        cfg = BrainConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_format_validation_error(exc, source)) from None
    base = config_path.parent
    return _absolutise(cfg, base, overridden)


def memory_of(cfg: BrainConfig) -> Memory:
    """The configuration's ledger (`state.ledger`), blobs (`state.blobs`; S3's endpoint
    and region are the publication's, else boto3's environment) and build directory,
    opened once per process and thread and reused by every step after."""
    from brain_pipeline.state.memory import open_memory

    s3 = cfg.publish.s3
    return open_memory(
        cfg.layout,
        cfg.ledger_url(),
        cfg.blobs_url(),
        region=s3.region,
        endpoint_url=s3.endpoint_url,
    )
