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
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

DEFAULT_CONFIG_NAME = "corpus_config.yaml"
DEFAULT_CANDIDATES = ("../patb-rag-curated-content", "../agent-project/patb-rag-curated-content")


class ConfigError(ValueError):
    """The configuration file or an override is invalid; the message names key and value."""


class CorpusNotFoundError(FileNotFoundError):
    """No corpus could be resolved; the message lists every candidate tried."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class CorpusSettings(_Section):
    path: Path | None = None
    candidates: list[Path] = Field(default_factory=lambda: [Path(p) for p in DEFAULT_CANDIDATES])


class EmbeddingSettings(_Section):
    provider: Literal["auto", "gemini", "local", "none"] = "auto"
    model: str = "gemini-embedding-001"
    dimension: int = Field(default=256, ge=1, le=3072)
    texts_per_minute: int = Field(default=3000, ge=1)
    requests_per_minute: int = Field(default=3000, ge=1)
    batch_size: int = Field(default=100, ge=1, le=100)
    max_attempts: int = Field(default=6, ge=1, le=50)
    local_model: str = "all-MiniLM-L6-v2-int8"


class RetrievalSettings(_Section):
    mode: Literal["hybrid", "lexical"] = "hybrid"


class Thresholds(_Section):
    min_ndcg_at_10: float | None = Field(default=None, ge=0.0, le=1.0)
    min_recall_at_10: float | None = Field(default=None, ge=0.0, le=1.0)
    max_misses: int | None = Field(default=None, ge=0)


class EvaluationSettings(_Section):
    fixture: Path = Path("examples/retrieval-eval.json")
    thresholds: dict[Literal["legacy", "bm25", "hybrid"], Thresholds] = Field(default_factory=dict)


class S3Settings(_Section):
    bucket: str | None = None
    prefix: str = ""
    region: str | None = None
    endpoint_url: str | None = None
    include_embeddings: bool = False

    @field_validator("prefix")
    @classmethod
    def _prefix_is_a_folder(cls, value: str) -> str:
        value = value.strip("/")
        return f"{value}/" if value else ""


class PublishSettings(_Section):
    root: Path | None = None
    agent_query_model: str = "gemini-embedding-001"
    force: bool = False
    s3: S3Settings = Field(default_factory=S3Settings)


class ScheduleSettings(_Section):
    cron: str = "0 3 * * *"
    timezone: str = "UTC"
    enabled: bool = True
    sensor_enabled: bool = False
    sensor_min_interval_seconds: int = Field(default=60, ge=5)

    @field_validator("cron")
    @classmethod
    def _five_fields(cls, value: str) -> str:
        if len(value.split()) != 5:
            raise ValueError("a cron expression has five fields, e.g. '0 3 * * *'")
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

    # ---- derived values -------------------------------------------------------------
    @property
    def base_dir(self) -> Path:
        """Folder that relative paths in the file refer to."""
        return self.config_path.parent if self.config_path else Path.cwd()

    def corpus_candidates(self) -> list[Path]:
        """Every place the corpus is looked for, in order (configured path first)."""
        found = [self.corpus.path] if self.corpus.path is not None else []
        return found + list(self.corpus.candidates)

    def corpus_root(self) -> Path:
        """The configured corpus path, else the first existing candidate; else a clear error."""
        if self.corpus.path is not None:
            if self.corpus.path.is_dir():
                return self.corpus.path
            raise CorpusNotFoundError(
                f"corpus path {self.corpus.path} (corpus.path / CURATED_CONTENT_PATH) "
                "is not a directory"
            )
        for candidate in self.corpus.candidates:
            if candidate.is_dir():
                return candidate
        tried = "\n".join(f"  - {c}" for c in self.corpus_candidates()) or "  (none)"
        raise CorpusNotFoundError(
            "no corpus found. Tried:\n"
            f"{tried}\n"
            "Set CURATED_CONTENT_PATH=/path/to/curated-content or corpus.path in "
            f"{self.config_path or DEFAULT_CONFIG_NAME}."
        )

    def gemini_api_key(self) -> str | None:
        """GEMINI_API_KEY, else GOOGLE_API_KEY; never logged, never stored in metadata."""
        for name in ("GEMINI_API_KEY", "GOOGLE_API_KEY"):
            value = os.environ.get(name, "").strip()
            if value:
                return value
        return None

    def effective_provider(self) -> Literal["gemini", "local", "none"]:
        """Resolve `auto`: Gemini when a key is set, the offline local model otherwise."""
        if self.embedding.provider == "auto":
            return "gemini" if self.gemini_api_key() else "local"
        return self.embedding.provider

    def effective_model(self) -> str:
        """The embedding model name that vectors built now will carry."""
        provider = self.effective_provider()
        if provider == "gemini":
            return self.embedding.model
        if provider == "local":
            return self.embedding.local_model
        return ""

    def publish_root(self) -> Path:
        """Where published artifacts go; defaults to <build_dir>/agent when unset."""
        return self.publish.root if self.publish.root is not None else self.build_dir / "agent"

    def instance_home(self) -> Path:
        """The Dagster instance folder shared by the CLI and `dagster dev`."""
        env = os.environ.get("DAGSTER_HOME", "").strip()
        if env:
            return Path(env).expanduser().resolve()
        if self.dagster_home is not None:
            return self.dagster_home
        return self.base_dir / ".dagster_home"

    def redacted(self) -> dict[str, Any]:
        """A JSON-safe view for logs and metadata; holds no secrets by construction."""
        return self.model_dump(mode="json")


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
)
_PATH_KEYS = {"corpus.path", "build_dir", "publish.root", "evaluation.fixture"}


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
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise ConfigError(f"configuration file not found: {path} (set BRAIN_CONFIG)") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"{path}: the top level must be a mapping of keys, not {type(data).__name__}"
        )
    return data


def _format_validation_error(exc: ValidationError, source: str) -> str:
    lines = [f"invalid configuration in {source}:"]
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"])
        value = err.get("input")
        shown = "" if isinstance(value, dict) else f" (got {value!r})"
        lines.append(f"  {key}: {err['msg']}{shown}")
    return "\n".join(lines)


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
    return cfg


def config_path_from_env(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    raw = env.get("BRAIN_CONFIG", "").strip()
    return Path(raw).expanduser().resolve() if raw else (Path.cwd() / DEFAULT_CONFIG_NAME).resolve()


def load_config(
    path: Path | str | None = None, env: Mapping[str, str] | None = None
) -> BrainConfig:
    """Load and validate the configuration, apply environment overrides, absolutise paths.

    `path` defaults to BRAIN_CONFIG, else ./corpus_config.yaml. A missing default file is
    not an error (built-in defaults apply); a missing explicit file is.
    """
    env = os.environ if env is None else env
    explicit = path is not None or bool(env.get("BRAIN_CONFIG", "").strip())
    config_path = (
        Path(path).expanduser().resolve() if path is not None else config_path_from_env(env)
    )
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
