"""How every benchmark measures and prints a figure, so a reader can reproduce it.

A figure is the median of at least `DEFAULT_RUNS` runs, printed with its range
(`median [min-max], N runs`). Measurements that have a peer take turns with it round by
round (`Session.rounds`), so a change of load on a shared machine hits both alike, and
their ratio is taken per round (`ratio`), then summarised the same way.

Every run states the machine's speed by a reference figure measured in the same run
(`reference_ms`): a fixed, deterministic workload of pure Python and numpy, timed before,
between and after the rounds. A reader on another machine runs the same command and
scales: a figure of 2.0 s next to "1 unit = 40 ms" is 50 units. The header also prints
the command, the CPU count and the load average, so the conditions are on record.
"""

from __future__ import annotations

import os
import platform
import shlex
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

DEFAULT_RUNS = 5
_REFERENCE_WORDS = tuple(f"w{i % 997}x{i % 13}" for i in range(20_000))


@dataclass(frozen=True)
class Figure:
    """Samples of one measurement; printed as median and range."""

    samples: tuple[float, ...]

    @classmethod
    def of(cls, samples: Iterable[float]) -> Figure:
        values = tuple(float(s) for s in samples)
        if not values:
            raise ValueError("a figure needs at least one sample")
        return cls(values)

    @property
    def median(self) -> float:
        return float(statistics.median(self.samples))

    @property
    def low(self) -> float:
        return min(self.samples)

    @property
    def high(self) -> float:
        return max(self.samples)

    def map(self, convert: Callable[[float], float]) -> Figure:
        """The same samples converted (e.g. seconds -> queries per second)."""
        return Figure.of(convert(s) for s in self.samples)

    def text(self, fmt: str = "{:.3f}", unit: str = "") -> str:
        """`median unit [low-high], N runs`; one run prints as a bare value."""
        suffix = f" {unit}" if unit else ""
        median = fmt.format(self.median)
        if len(self.samples) == 1:
            return f"{median}{suffix} (1 run)"
        return (
            f"{median}{suffix} [{fmt.format(self.low)}-{fmt.format(self.high)}], "
            f"{len(self.samples)} runs"
        )


def ratio(numerator: Figure, denominator: Figure) -> Figure:
    """Round-by-round ratio of two figures measured in the same rounds."""
    pairs = zip(numerator.samples, denominator.samples, strict=True)
    return Figure.of(a / b for a, b in pairs)


def timed(action: Callable[[], object]) -> float:
    """Wall seconds of one call."""
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def reference_workload() -> int:
    """One unit of fixed work: string hashing and dict updates in pure Python, then a
    seeded numpy sort and bincount. Deterministic; returns a checksum so nothing is
    optimised away (the same on every machine)."""
    counts: dict[str, int] = {}
    for word in _REFERENCE_WORDS:
        counts[word] = counts.get(word, 0) + len(word)
    total = sum(v * (i % 7) for i, v in enumerate(counts.values()))
    values = np.random.default_rng(20240601).random(400_000)
    order = np.argsort(values, kind="stable")
    bins = np.bincount((values * 1000).astype(np.int64), minlength=1000)
    return total + int(order[:1000].sum()) + int(bins.max())


def reference_ms() -> float:
    """Milliseconds of one reference unit (one timed call)."""
    return timed(reference_workload) * 1000.0


def command_line() -> str:
    """The command that produced this output, as a reader would type it."""
    script = Path(sys.argv[0])
    try:
        script = script.resolve().relative_to(Path.cwd().resolve())
    except ValueError:
        script = Path("benchmarks") / script.name
    return shlex.join(["python", str(script), *sys.argv[1:]])


def machine_line() -> str:
    load = "/".join(f"{x:.1f}" for x in os.getloadavg())
    return (
        f"machine: {os.cpu_count()} CPUs, load average {load} (1/5/15 min); "
        f"Python {platform.python_version()}, numpy {np.__version__}"
    )


@dataclass
class Session:
    """One benchmark run: prints the header, interleaves the reference with the rounds
    and prints the reference figure at the end."""

    runs: int = DEFAULT_RUNS
    reference: list[float] = field(default_factory=list)

    def start(self) -> Session:
        print(f"command: {command_line()}")
        print(machine_line())
        reference_workload()  # warm-up (imports, allocator)
        self.reference.extend(reference_ms() for _ in range(3))
        print(
            f"runs: median of {self.runs} with [min-max]; reference measured before, "
            "between the rounds and after",
            flush=True,
        )
        return self

    def rounds(
        self,
        actions: Mapping[str, Callable[[], object]],
        runs: int | None = None,
        measure: Callable[[Callable[[], object]], float] = timed,
    ) -> dict[str, Figure]:
        """`runs` rounds; in each, every action once (the starting one rotating, so no
        action always runs first) and one reference unit. Returns each action's figure."""
        names = list(actions)
        samples: dict[str, list[float]] = {name: [] for name in names}
        for round_number in range(runs or self.runs):
            shift = round_number % len(names)
            for name in names[shift:] + names[:shift]:
                samples[name].append(measure(actions[name]))
            self.reference.append(reference_ms())
        return {name: Figure.of(values) for name, values in samples.items()}

    def repeat(self, action: Callable[[], object], runs: int | None = None) -> Figure:
        """One action, `runs` times (with the reference between runs)."""
        return self.rounds({"action": action}, runs)["action"]

    def note_reference(self) -> None:
        """One more reference sample (for benchmarks that loop on their own)."""
        self.reference.append(reference_ms())

    def finish(self) -> Figure:
        """Prints the reference figure (and the load now); returns it."""
        self.reference.extend(reference_ms() for _ in range(3))
        figure = Figure.of(self.reference)
        print(
            f"reference: 1 unit = {figure.text('{:.1f}', 'ms')} "
            "(benchmarks/_figures.py reference_workload; scale figures by it)"
        )
        print(machine_line())
        return figure
