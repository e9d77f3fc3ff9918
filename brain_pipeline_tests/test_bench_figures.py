"""benchmarks/_figures.py: how every benchmark summarises and interleaves its runs.

The helper is a sibling script of the benchmarks (not a package), imported by path.
Timing is injected (`measure=`), so nothing here depends on the machine's speed.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from _figures import Figure, Session, ratio, reference_workload  # noqa: E402


def test_a_figure_is_the_median_with_its_range() -> None:
    figure = Figure.of([3.0, 1.0, 2.0, 10.0, 4.0])
    assert (figure.median, figure.low, figure.high) == (3.0, 1.0, 10.0)
    assert figure.text("{:.1f}", "s") == "3.0 s [1.0-10.0], 5 runs"


def test_one_run_says_so_and_no_runs_is_refused() -> None:
    assert Figure.of([2.5]).text("{:.2f}", "s") == "2.50 s (1 run)"
    with pytest.raises(ValueError):
        Figure.of([])


def test_converted_samples_keep_their_range_the_right_way_round() -> None:
    per_second = Figure.of([0.5, 0.25, 1.0]).map(lambda seconds: 100 / seconds)
    assert (per_second.median, per_second.low, per_second.high) == (200.0, 100.0, 400.0)


def test_ratios_pair_the_samples_of_one_round() -> None:
    # round by round 2x; the ratio of the medians would be 3 / 1.5 = 2 too, but the
    # range shows the pairing: every round is exactly 2x
    ours = Figure.of([1.0, 3.0, 5.0])
    peer = Figure.of([2.0, 6.0, 10.0])
    assert ratio(peer, ours).samples == (2.0, 2.0, 2.0)
    with pytest.raises(ValueError):
        ratio(peer, Figure.of([1.0]))


def _fake_clock(order: list[str]) -> Callable[[Callable[[], object]], float]:
    values: Iterator[float] = iter(float(n) for n in range(1, 100))

    def measure(action: Callable[[], object]) -> float:
        order.append(str(action()))
        return next(values)

    return measure


def test_rounds_interleave_the_actions_and_rotate_who_goes_first(
    capsys: pytest.CaptureFixture[str],
) -> None:
    order: list[str] = []
    session = Session(runs=3)
    figures = session.rounds(
        {"ours": lambda: "ours", "peer": lambda: "peer"}, measure=_fake_clock(order)
    )
    assert order == ["ours", "peer", "peer", "ours", "ours", "peer"]
    assert figures["ours"].samples == (1.0, 4.0, 5.0)
    assert figures["peer"].samples == (2.0, 3.0, 6.0)
    assert len(session.reference) == 3  # one reference unit after every round


def test_a_session_prints_the_command_the_machine_and_the_reference(
    capsys: pytest.CaptureFixture[str],
) -> None:
    session = Session(runs=5).start()
    session.repeat(lambda: None, runs=2)
    reference = session.finish()
    out = capsys.readouterr().out
    assert out.startswith("command: python ")
    assert "CPUs, load average" in out
    assert "reference: 1 unit = " in out and " ms [" in out
    assert len(reference.samples) == 3 + 2 + 3  # before, between the rounds, after


def test_the_reference_workload_is_deterministic() -> None:
    assert reference_workload() == reference_workload()
