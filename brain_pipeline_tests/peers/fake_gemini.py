"""A Gemini embeddings REST server on loopback, for driving the real google-genai SDK.

It implements `POST /{v1,v1beta}/models/{model}:batchEmbedContents` as the service does
(body and error shapes as observed). That is the only endpoint google-genai uses with an
API key, for every model, gemini-embedding-2 included (`:embedContent` and `:predict`
are Vertex-mode only). One vector per `requests[]` entry; a content of several parts
is merged into ONE vector, as a multimodal model (gemini-embedding-2) does with the
multi-part content the SDK builds from a list of strings — so a client that lets the SDK
merge its texts gets one vector for a whole batch here too. Plus what tests and
benchmarks need to stage trouble:

* deterministic vectors from a hash of (text, dimension): `fake_vector()`;
* a quota of `quota_texts` texts per fixed window of `window_seconds`, answering 429
  RESOURCE_EXHAUSTED with a RetryInfo `retryDelay` equal to the time left in the window
  (a refused request does not count against the quota);
* scripted answers (`script=[200, 500, 503, ...]` consumed one per request; 200 means
  "answer normally", so a failure can be placed mid-run), a per-request
  `delay_seconds`, 400 beyond 100 texts, 400 INVALID_ARGUMENT for a wrong key, 403 for
  keys listed in `forbidden_keys`, 404 for models outside `models`;
* per-text refusals as the service words them: a request holding a text over the
  model's input limit (`max_input_tokens`; by default the model's documented limit,
  `MODEL_MAX_TOKENS`: 2,048 for gemini-embedding-001, 8,192 for gemini-embedding-2; 0
  lifts it) counted by `fake_token_count` is answered 400 INVALID_ARGUMENT
  `* BatchEmbedContentsRequest.requests[i].content: the input token count (N) exceeds
  the maximum number of tokens allowed (2048).`, one holding a text that contains one of
  `refuse_substrings` 400 INVALID_ARGUMENT `* ...requests[i].content: the input is not
  supported by the model.`, naming the first such text (`name_refused_index=False`
  leaves the index out);
* bad answers: a text containing a key of `bad_answers` gets a vector that is all zeros
  (`"zero"`), has a NaN (`"nan"`) or an infinite (`"inf"`) component, served as the
  JSON the service would send (`NaN`, `Infinity`); `bad_answer_times` limits how many
  such answers each text gets (then it is answered normally);
* `GET /stats` (texts, requests, rate_limited, task types, batch sizes) and
  `POST /reset` / `POST /config` (JSON body of settings), so a test can steer a server
  that another process is talking to.

The server runs in a daemon thread of the test process; use it as a context manager.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

import numpy as np
import numpy.typing as npt

MAX_BATCH = 100
DEFAULT_MODELS = ("gemini-embedding-001", "gemini-embedding-2", "text-embedding-004")
PART_SEPARATOR = "\n"
"""How the parts of one content are joined before hashing: a merged content has its own
vector, different from each part's."""


MODEL_MAX_TOKENS = {"gemini-embedding-001": 2048, "text-embedding-004": 2048,
                    "gemini-embedding-2": 8192}
"""Input tokens per text the fake takes by default, per model (the documented limits)."""

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_PIECES = re.compile(
    rf"(?P<cjk>[{_CJK}])"
    r"|(?P<digits>[0-9]+)"
    rf"|(?P<word>(?:(?![{_CJK}])[^\W\d_])+)"
    r"|(?P<space>\s+)"
    r"|(?P<astral>[\U00010000-\U0010ffff])"
    r"|(?P<other>(?P<char>.)(?P=char){0,3})",
    re.DOTALL,
)


def fake_token_count(text: str) -> int:
    """The fake's stand-in for the service's tokenizer, shaped like a subword tokenizer
    rather than one token per character, so that a local guess can be wrong in both
    directions and the tests see what trusting the service's count means.

    * a run of letters (any script but CJK): one token per 4 ASCII letters, rounded up
      (`the` 1, `pipeline` 2), or per 3 letters when it holds non-ASCII ones
      (accented Latin, Cyrillic, Greek: `Кириллица` 3);
    * a run of ASCII digits: one token per 3 digits (`2048` 2, `3.14159` 1 + 1 + 2);
    * each CJK character (kana, Han, Hangul): one token;
    * a single space: nothing (it joins the next word); any other run of whitespace
      (line breaks, indentation): one token per 4 characters;
    * an astral character (emoji): two tokens;
    * punctuation and symbols: one token per run of up to 4 equal characters (`|` 1,
      `----` 1).
    """
    tokens = 0
    for match in _PIECES.finditer(text):
        kind = match.lastgroup
        piece = match.group()
        if kind == "digits":
            tokens += -(-len(piece) // 3)
        elif kind == "word":
            tokens += -(-len(piece) // (4 if piece.isascii() else 3))
        elif kind == "space":
            tokens += 0 if piece == " " else -(-len(piece) // 4)
        elif kind == "astral":
            tokens += 2
        else:
            tokens += 1
    return tokens


def _bad_vector(kind: str, dimension: int) -> list[float]:
    values = [0.0] * dimension
    if kind == "nan":
        values = [0.1] * dimension
        values[dimension // 2] = float("nan")
    elif kind == "inf":
        values = [0.1] * dimension
        values[0] = float("inf")
    elif kind != "zero":
        raise ValueError(f"unknown bad answer {kind!r}")
    return values


def fake_vector(text: str, dimension: int) -> npt.NDArray[np.float64]:
    """The vector the server returns for `text` at `dimension` (not normalised, as Gemini's)."""
    seed = hashlib.sha256(f"{dimension}\x00{text}".encode("utf-8", "surrogatepass")).digest()
    rng = np.random.default_rng(int.from_bytes(seed[:8], "little"))
    return rng.standard_normal(dimension) * 0.3


@dataclass
class Settings:
    """What the server does; every field can be changed through configure() or /config."""

    api_key: str | None = "test-key"  # None accepts any key
    forbidden_keys: list[str] = field(default_factory=list)
    models: list[str] = field(default_factory=lambda: list(DEFAULT_MODELS))
    quota_texts: int | None = None
    window_seconds: float = 60.0
    delay_seconds: float = 0.0
    script: list[int] = field(default_factory=list)
    # Requests after this many are held unanswered until the setting is cleared (None):
    # lets a test kill a client at a known point instead of racing it with sleeps.
    hold_after_requests: int | None = None
    # None: the model's documented limit (MODEL_MAX_TOKENS); 0: no limit
    max_input_tokens: int | None = None
    refuse_substrings: list[str] = field(default_factory=list)
    name_refused_index: bool = True
    bad_answers: dict[str, str] = field(default_factory=dict)
    bad_answer_times: int | None = None


@dataclass
class Stats:
    """What the server saw. `texts` counts contents (= vectors) in accepted (200) requests."""

    texts: int = 0
    requests: int = 0
    rate_limited: int = 0
    errors: int = 0
    task_types: dict[str, int] = field(default_factory=dict)
    api_versions: dict[str, int] = field(default_factory=dict)
    batch_sizes: list[int] = field(default_factory=list)
    merged_contents: int = 0  # accepted contents of more than one part (one vector each)
    accepted_at: list[float] = field(default_factory=list)  # server clock, per accepted request
    sent_texts: list[str] = field(default_factory=list)  # every text of every request
    refused: int = 0  # requests refused for one of their texts
    bad_answers: int = 0  # bad vectors served


def _error(code: int, status: str, message: str, details: list[dict[str, Any]] | None = None
           ) -> tuple[int, dict[str, Any]]:
    body: dict[str, Any] = {"code": code, "message": message, "status": status}
    if details:
        body["details"] = details
    return code, {"error": body}


class FakeGemini:
    """The server object: `url`, `configure(**settings)`, `stats()`, `reset()`."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic, **settings: Any) -> None:
        # The quota windows follow `clock`: a test that drives the client's sleeps with a
        # fake clock passes the same one here, so windows move only when the client waits.
        self._clock = clock
        self._lock = threading.Lock()
        self.settings = Settings(**settings)
        self._stats = Stats()
        self._released = threading.Event()
        self._released.set()
        self.holding = threading.Event()
        """Set once a request is being held (see `hold_after_requests`)."""
        self._window_start = clock()
        self._window_used = 0
        self._served_bad: dict[str, int] = {}
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    # -------------------------------------------------------------- lifecycle
    def start(self) -> FakeGemini:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._released.set()  # let held requests finish so their threads end
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> FakeGemini:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    # -------------------------------------------------------------- control
    def configure(self, **settings: Any) -> None:
        """Change settings; changing the quota or window starts a fresh window."""
        with self._lock:
            for key, value in settings.items():
                if not hasattr(self.settings, key):
                    raise ValueError(f"unknown setting {key}")
                setattr(self.settings, key, value)
            if {"quota_texts", "window_seconds"} & settings.keys():
                self._window_start = self._clock()
                self._window_used = 0
            if "hold_after_requests" in settings:
                self._update_hold()

    def reset(self) -> None:
        """Default settings, zeroed statistics, a fresh quota window."""
        with self._lock:
            self.settings = Settings()
            self._stats = Stats()
            self._served_bad = {}
            self._update_hold()
            self._window_start = self._clock()
            self._window_used = 0

    def _update_hold(self) -> None:
        self.holding.clear()
        if self.settings.hold_after_requests is None:
            self._released.set()
        else:
            self._released.clear()

    def stats(self) -> Stats:
        with self._lock:
            s = self._stats
            return Stats(s.texts, s.requests, s.rate_limited, s.errors, dict(s.task_types),
                         dict(s.api_versions), list(s.batch_sizes), s.merged_contents,
                         list(s.accepted_at), list(s.sent_texts), s.refused, s.bad_answers)

    # -------------------------------------------------------------- the endpoint
    def embed(self, version: str, model: str, key: str | None, body: Any
              ) -> tuple[int, dict[str, Any]]:
        """Answer one batchEmbedContents call: (HTTP status, JSON body)."""
        with self._lock:
            self._stats.requests += 1
            self._stats.api_versions[version] = self._stats.api_versions.get(version, 0) + 1
            delay = self.settings.delay_seconds
            hold = self.settings.hold_after_requests
            held = hold is not None and self._stats.requests > hold
        if held:
            self.holding.set()
            self._released.wait()
        if delay:
            time.sleep(delay)
        with self._lock:
            status, payload = self._decide(version, model, key, body)
            if status == 429:
                self._stats.rate_limited += 1
            elif status != 200:
                self._stats.errors += 1
            return status, payload

    def _decide(self, version: str, model: str, key: str | None, body: Any
                ) -> tuple[int, dict[str, Any]]:
        s = self.settings
        code = s.script.pop(0) if s.script else 200
        if code != 200:
            status = {500: "INTERNAL", 503: "UNAVAILABLE"}.get(code, "UNKNOWN")
            return _error(code, status, "scripted failure")
        if s.api_key is not None and key != s.api_key:
            return _error(400, "INVALID_ARGUMENT",
                          "API key not valid. Please pass a valid API key.",
                          [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                            "reason": "API_KEY_INVALID", "domain": "googleapis.com"}])
        if key in s.forbidden_keys:
            return _error(403, "PERMISSION_DENIED",
                          "Method doesn't allow unregistered callers or this project.")
        if model not in s.models:
            return _error(404, "NOT_FOUND", f"models/{model} is not found for API version "
                          f"{version}, or is not supported for embedContent.")
        requests = body.get("requests") if isinstance(body, dict) else None
        if not isinstance(requests, list) or not requests:
            return _error(400, "INVALID_ARGUMENT", "requests must be a non-empty list")
        if len(requests) > MAX_BATCH:
            return _error(400, "INVALID_ARGUMENT",
                          f"* BatchEmbedContentsRequest.requests: at most {MAX_BATCH} "
                          "requests can be in one batch")
        texts = [PART_SEPARATOR.join(part.get("text", "") for part in item["content"]["parts"])
                 for item in requests]
        self._stats.sent_texts.extend(texts)
        refused = self._refuse_text(model, texts)
        if refused is not None:
            self._stats.refused += 1
            return refused
        refusal = self._charge_quota(len(requests))
        if refusal is not None:
            return refusal
        vectors = []
        merged = 0
        for item, text in zip(requests, texts, strict=True):
            merged += len(item["content"]["parts"]) > 1
            dim = int(item.get("outputDimensionality") or 3072)
            task = str(item.get("taskType", "TASK_TYPE_UNSPECIFIED"))
            self._stats.task_types[task] = self._stats.task_types.get(task, 0) + 1
            bad = self._bad_answer(text)
            values = fake_vector(text, dim).tolist() if bad is None else _bad_vector(bad, dim)
            vectors.append({"values": values})
        self._stats.texts += len(requests)
        self._stats.merged_contents += merged
        self._stats.batch_sizes.append(len(requests))
        self._stats.accepted_at.append(self._clock())
        return 200, {"embeddings": vectors}

    def input_limit(self, model: str) -> int | None:
        """Tokens per text `model` takes here (None: no limit)."""
        limit = self.settings.max_input_tokens
        if limit is None:
            return MODEL_MAX_TOKENS.get(model)
        return limit or None

    def _refuse_text(self, model: str, texts: list[str]) -> tuple[int, dict[str, Any]] | None:
        """400 INVALID_ARGUMENT for the first text over the token limit or marked refused."""
        s = self.settings
        limit = self.input_limit(model)
        for index, text in enumerate(texts):
            marked = any(marker in text for marker in s.refuse_substrings)
            tokens = fake_token_count(text) if limit is not None else 0
            over = limit is not None and tokens > limit
            if not (marked or over):
                continue
            where = f"BatchEmbedContentsRequest.requests[{index}].content" \
                if s.name_refused_index else "BatchEmbedContentsRequest.requests"
            if over:
                return _error(400, "INVALID_ARGUMENT",
                              f"* {where}: the input token count ({tokens}) exceeds the "
                              f"maximum number of tokens allowed ({limit}).")
            return _error(400, "INVALID_ARGUMENT",
                          f"* {where}: the input is not supported by the model.")
        return None

    def _bad_answer(self, text: str) -> str | None:
        """The bad kind of vector `text` gets now, if any (counted per served answer)."""
        s = self.settings
        for marker, kind in s.bad_answers.items():
            if marker in text:
                if s.bad_answer_times is not None:
                    served = self._served_bad.get(text, 0)
                    if served >= s.bad_answer_times:
                        return None
                    self._served_bad[text] = served + 1
                self._stats.bad_answers += 1
                return kind
        return None

    def _charge_quota(self, n: int) -> tuple[int, dict[str, Any]] | None:
        """Fixed windows from the last reset; a refused request costs nothing."""
        quota = self.settings.quota_texts
        if quota is None:
            return None
        window = self.settings.window_seconds
        now = self._clock()
        elapsed = now - self._window_start
        if elapsed >= window:
            self._window_start += window * int(elapsed // window)
            self._window_used = 0
        if self._window_used + n <= quota:
            self._window_used += n
            return None
        left = window - (now - self._window_start)
        return _error(
            429, "RESOURCE_EXHAUSTED",
            "Quota exceeded for metric: generativelanguage.googleapis.com/"
            "embed_content_free_tier_requests, limit: " + str(quota),
            [
                {"@type": "type.googleapis.com/google.rpc.QuotaFailure",
                 "violations": [{"quotaMetric": "embed_content_requests", "quotaId": "Fake"}]},
                {"@type": "type.googleapis.com/google.rpc.Help", "links": []},
                {"@type": "type.googleapis.com/google.rpc.RetryInfo",
                 "retryDelay": f"{max(left, 0.0):.9f}s"},
            ],
        )

    # -------------------------------------------------------------- HTTP plumbing
    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                return  # keep test output quiet

            def _send(self, status: int, payload: Any) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json; charset=UTF-8")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _body(self) -> Any:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    return json.loads(raw) if raw else {}
                except ValueError:
                    return None

            def do_GET(self) -> None:  # noqa: N802
                if self.path.rstrip("/") == "/stats":
                    self._send(200, server.stats().__dict__)
                else:
                    self._send(*_error(404, "NOT_FOUND", f"no route {self.path}"))

            def do_POST(self) -> None:  # noqa: N802
                body = self._body()
                path = self.path.split("?", 1)[0]
                if path == "/reset":
                    server.reset()
                    self._send(200, {})
                    return
                if path == "/config":
                    try:
                        server.configure(**(body or {}))
                    except (TypeError, ValueError) as exc:
                        self._send(*_error(400, "INVALID_ARGUMENT", str(exc)))
                        return
                    self._send(200, {})
                    return
                parts = path.strip("/").split("/")
                if (len(parts) == 3 and parts[0] in ("v1", "v1beta") and parts[1] == "models"
                        and parts[2].endswith(":batchEmbedContents")):
                    model = parts[2].rsplit(":", 1)[0]
                    key = self.headers.get("x-goog-api-key")
                    self._send(*server.embed(parts[0], model, key, body))
                    return
                self._send(*_error(404, "NOT_FOUND", f"no route {path}"))

        return Handler
