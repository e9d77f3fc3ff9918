"""Child process of the kill -9 tests: `python -m brain_pipeline_tests.embedding.build_child
OUT CHUNKS BATCH [LEDGER_URL BLOBS_URL]` builds embeddings for a synthetic corpus against
GOOGLE_GEMINI_BASE_URL (with the URLs: its packs in that ledger and blob store)."""

from __future__ import annotations

import sys

from brain_pipeline_tests.embedding.helpers import build_with_gemini

if __name__ == "__main__":
    out, chunks, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    build_with_gemini(out, {"big.md": chunks}, batch, *sys.argv[4:6])
