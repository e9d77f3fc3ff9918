"""Quota pacing against our fake Gemini server, next to the old fixed-sleep strategy.

Usage: python benchmarks/bench_pacing.py [--q 24000] [--chunks 6000] [--window 10]
                                         [--latency 0.05] [--batch 100] [--also-3000]
                                         [--runs 5]

The server enforces Q texts per minute as a fixed window of `--window` seconds holding
Q·window/60 texts (a short window keeps the run short while crossing window boundaries;
the pacer is told the same window length, as it is told 60 s for the real service).
Every request takes `--latency` seconds at the server (scaled down like the window).

Runs, all in this process against the same server:
  1. paced     build_embeddings with our token-bucket pacer, server quota = Q
  2. fixed     the old way: sleep 60/Q × batch after each request, server quota = Q
  3. half      our pacer configured for Q while the server allows only Q/2 — must finish
               correctly, waiting out the 429s it gets (bounded waiting)
  4. (--also-3000) the real-world setting: Q = 3,000/min, 60 s window, 2,000 chunks

Figures: achieved texts/min ÷ Q (goal >= 0.9), 429s (goal 0 when quotas agree), seconds
spent waiting, wall time. Runs 1-3 take turns for `--runs` rounds (default 5); each
figure is printed as median [min-max] (benchmarks/_figures.py), with a reference unit
timed between the rounds to state the machine's speed; run 4 runs once.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from _figures import DEFAULT_RUNS, Figure, Session

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for brain_pipeline_tests

from brain_pipeline.corpus.store import Chunk, chunk_id
from brain_pipeline.embedding.builder import build_embeddings
from brain_pipeline.embedding.gemini import GeminiEmbedder
from brain_pipeline.retrieval.vectors import decode_embeddings
from brain_pipeline_tests.peers.fake_gemini import FakeGemini

KEY = "bench-key"


@dataclass
class Outcome:
    name: str
    texts: int
    seconds: float
    rate_limited: int
    waited: float
    quota_per_minute: float

    @property
    def ratio(self) -> float:
        """Achieved texts per minute ÷ the server's quota."""
        return 60.0 * self.texts / self.seconds / self.quota_per_minute

    def line(self) -> str:
        per_minute = 60.0 * self.texts / self.seconds
        return (f"{self.name:<34} {self.texts:>6} texts {self.seconds:>7.1f} s "
                f"{per_minute:>9.0f}/min  ratio {per_minute / self.quota_per_minute:5.3f}  "
                f"429s {self.rate_limited:>3}  waited {self.waited:6.1f} s")


def chunks(n: int) -> list[Chunk]:
    out = []
    for i in range(n):
        text = f"Benchmark paragraph {i}: pacing keeps the run under the quota without 429s."
        out.append(Chunk(id=chunk_id(text), content=text, area="bench", source="bench/p.md"))
    return out


def embedder(q: float, window: float, batch: int) -> GeminiEmbedder:
    return GeminiEmbedder(api_key=KEY, dimension=64, texts_per_minute=q, batch_size=batch,
                          window_seconds=window)


def prepare(server: FakeGemini, q: float, window: float, latency: float) -> None:
    """Fresh statistics and a quota window that starts now."""
    server.reset()
    server.configure(api_key=KEY, quota_texts=int(q * window / 60), window_seconds=window,
                     delay_seconds=latency)


def run_paced(server: FakeGemini, name: str, items: list[Chunk], client_q: float,
              server_q: float, window: float, batch: int, latency: float) -> Outcome:
    prepare(server, server_q, window, latency)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "embeddings.bin"
        started = time.monotonic()
        report = build_embeddings(items, out, embedder(client_q, window, batch))
        seconds = time.monotonic() - started
        assert decode_embeddings(out.read_bytes()).ids == [c.id for c in items]
    assert server.stats().texts == len(items)
    return Outcome(name, report.embedded, seconds, report.rate_limited, report.waited_seconds,
                   server_q)


def run_fixed_sleep(server: FakeGemini, items: list[Chunk], q: float, window: float,
                    batch: int, latency: float) -> Outcome:
    """The strategy this replaces: no bucket, a fixed pause after every request."""
    prepare(server, q, window, latency)
    client = embedder(1e9, window, batch)  # pacer effectively off
    pause = 60.0 / q * batch
    texts = [c.content for c in items]
    started = time.monotonic()
    waited = 0.0
    for start in range(0, len(texts), batch):
        client.embed_documents(texts[start : start + batch])
        time.sleep(pause)
        waited += pause
    seconds = time.monotonic() - started
    return Outcome("fixed sleep 60/Q×batch (old)", len(texts), seconds,
                   client.stats.rate_limited, waited + client.stats.waited_seconds, q)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--q", type=float, default=24_000, help="quota, texts per minute")
    parser.add_argument("--chunks", type=int, default=6_000)
    parser.add_argument("--window", type=float, default=10.0, help="server window, seconds")
    parser.add_argument("--latency", type=float, default=0.05, help="server seconds/request")
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--also-3000", action="store_true",
                        help="also run Q=3000/min, 60 s window, 2000 chunks (~45 s)")
    parser.add_argument("--runs", type=int, default=DEFAULT_RUNS, help="rounds (median)")
    args = parser.parse_args()
    session = Session(runs=args.runs).start()
    for name in ("GOOGLE_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GENAI_USE_ENTERPRISE",
                 "GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION", "GOOGLE_GENAI_API_VERSION"):
        os.environ.pop(name, None)
    items = chunks(args.chunks)
    with FakeGemini(api_key=KEY, delay_seconds=args.latency) as server:
        os.environ["GOOGLE_GEMINI_BASE_URL"] = server.url
        print(f"Q = {args.q:.0f} texts/min as {args.q * args.window / 60:.0f} texts per "
              f"{args.window:g} s window; {args.chunks} chunks; batch {args.batch}; "
              f"server latency {args.latency * 1000:.0f} ms/request")
        pacer_rate = embedder(args.q, args.window, args.batch).pacer.texts_rate_per_minute
        print(f"pacer sustained rate: {pacer_rate:.0f}/min ({pacer_rate / args.q:.3f} of Q)")
        rounds: dict[str, Callable[[], Outcome]] = {
            "paced (ours), server quota Q": lambda: run_paced(
                server, "paced (ours), server quota Q", items, args.q, args.q, args.window,
                args.batch, args.latency),
            "fixed sleep 60/Q×batch (old)": lambda: run_fixed_sleep(
                server, items, args.q, args.window, args.batch, args.latency),
            "paced (ours), server quota Q/2": lambda: run_paced(
                server, "paced (ours), server quota Q/2", items, args.q, args.q / 2,
                args.window, args.batch, args.latency),
        }
        outcomes: dict[str, list[Outcome]] = {name: [] for name in rounds}

        def achieved(name: str) -> float:
            outcome = rounds[name]()
            outcomes[name].append(outcome)
            print(outcome.line(), flush=True)
            return outcome.ratio

        session.rounds({name: functools.partial(achieved, name) for name in rounds},
                       measure=lambda action: float(action()))  # type: ignore[arg-type]
        extra = None
        if args.also_3000:
            extra = run_paced(server, "paced, Q=3000/min, 60 s window", items[:2000],
                              3000, 3000, 60.0, args.batch, args.latency * 8)
    print("summary, median [min-max] over the rounds:")
    for name, runs in outcomes.items():
        ratios = Figure.of(o.ratio for o in runs)
        limited = Figure.of(o.rate_limited for o in runs)
        print(f"  {name:<32} ratio {ratios.text('{:.3f}')}; 429s {limited.text('{:.0f}')}")
    if extra is not None:
        print(f"  {extra.line()}")
    print("ratio = achieved texts/min ÷ the server's quota (goal >= 0.9, 0 429s when the "
          "quotas agree; the Q/2 run must finish, its waiting bounded by the 429 delays)")
    session.finish()


if __name__ == "__main__":
    main()
