"""The refusal probe: the sample corpus plus one file holding a 23 KB paragraph, built
twice by `brain-pipeline materialize` against our fake Gemini server.

Usage: python benchmarks/probe_refusals.py [--refuse] [--skip]

`--refuse`: the fake also refuses every request holding the paragraph (400
INVALID_ARGUMENT naming it, "not supported"), whatever its length; without it, the fake
refuses only texts over 2,048 of its tokens (`fake_token_count`, shaped like a subword
tokenizer's), as the service does by length. `--skip` sets
`embedding.too_long: skip`. Prints each run's `embedding_gaps` summary line, what the
fake saw (requests, texts sent, refused requests), the extra requests the refusal cost,
and the check's rows. Evaluation thresholds are dropped: the fake's vectors are hashes,
not semantics. Everything lives in a temporary directory.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from brain_pipeline.config import load_config  # noqa: E402
from brain_pipeline.steps.health import embedding_gap_rows  # noqa: E402
from brain_pipeline_tests.peers.fake_gemini import FakeGemini  # noqa: E402

KEY = "probe-key"
MARKER = "REFTABLE"


def reference_table() -> str:
    rows = [f"| row {i} | code P{i:04d} | value {i * 7 % 1000} | {MARKER} |" for i in range(480)]
    return "# Reference table\n\n" + "\n".join(rows) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--refuse", action="store_true")
    parser.add_argument("--skip", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        corpus = work / "corpus"
        shutil.copytree(REPO / "examples" / "curated-content", corpus)
        table = corpus / sorted(p.name for p in corpus.iterdir())[0] / "reference-table.md"
        table.write_text(reference_table(), encoding="utf-8")
        print(f"{table.relative_to(corpus)}: {table.stat().st_size} bytes")
        cfg = yaml.safe_load((REPO / "corpus_config.yaml").read_text(encoding="utf-8"))
        cfg["evaluation"] = {"fixture": str(REPO / "examples" / "retrieval-eval.json"),
                             "thresholds": {}}
        cfg["embedding"]["too_long"] = "skip" if args.skip else "truncate"
        config = work / "config.yaml"
        config.write_text(yaml.safe_dump(cfg), encoding="utf-8")
        fake = {"refuse_substrings": [MARKER]} if args.refuse else {"max_input_tokens": 2048}
        with FakeGemini(api_key=KEY, **fake) as server:
            env = dict(os.environ, BRAIN_CONFIG=str(config), CURATED_CONTENT_PATH=str(corpus),
                       BRAIN_BUILD_DIR=str(work / "build"), DAGSTER_HOME=str(work / "dh"),
                       BRAIN_PUBLISH_ROOT=str(work / "publish"), GEMINI_API_KEY=KEY,
                       GOOGLE_GEMINI_BASE_URL=server.url, PYTHONPATH=str(REPO))
            for name in ("GOOGLE_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_CLOUD_PROJECT"):
                env.pop(name, None)
            (work / "dh").mkdir()
            for run in (1, 2):
                done = subprocess.run([sys.executable, "-m", "brain_pipeline.cli", "materialize"],
                                      env=env, capture_output=True, text=True, check=False)
                lines = [ln for ln in done.stderr.splitlines() + done.stdout.splitlines()
                         if "embedding_gaps" in ln or ln.startswith(("succeeded", "FAILED"))]
                stats = server.stats()
                documents = stats.task_types.get("RETRIEVAL_DOCUMENT", 0)
                print(f"run {run}: rc {done.returncode}; fake: {stats.requests} requests, "
                      f"{len(stats.sent_texts)} texts sent, {documents} document vectors "
                      f"served, {stats.refused} refused requests")
                print("\n".join(lines))
                server.reset()
                server.configure(api_key=KEY, **fake)
        rows = embedding_gap_rows(load_config(config))
        print("embedding_gaps rows (source | heading | chunk id | reason):")
        for row in rows:
            print("  " + " | ".join(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
