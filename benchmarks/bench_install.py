"""What the default install costs: disk and time of `pip install .` into a fresh venv.

Each side is a commit of this repository (`--before`, `--after`), exported with `git
archive` into a temporary folder (so neither checkout gets a build/ or .egg-info folder).
Per round, and for each side in turn (the first one rotating, benchmarks/_figures.py):
`python -m venv` makes an empty environment, then `python -m pip install -q PROJECT` is
timed (wall seconds; the venv's creation is not counted), and the environment's
site-packages is measured (MB of its files, and how many distributions it holds). The
environment is then deleted. Figures are the median [min-max] of `--runs` rounds
(default 3: one install takes minutes).

pip runs as configured on the machine (`pip config list`: its cache and any local wheel
index or find-links apply to both sides alike); `--extras local` measures `.[local]`.

    python benchmarks/bench_install.py --before 44142d0 --after HEAD --runs 3
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _figures import Figure, Session  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def export(rev: str, into: Path) -> Path:
    """The tree of `rev`, written to `into` (a fresh folder)."""
    into.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", rev], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def site_packages(venv: Path) -> Path:
    found = sorted(venv.glob("lib/python*/site-packages"))
    if not found:
        raise SystemExit(f"no site-packages under {venv}")
    return found[0]


def folder_bytes(folder: Path) -> int:
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            path = Path(root) / name
            if not path.is_symlink():
                total += path.stat().st_size
    return total


def install_once(project: Path, extras: str, work: Path) -> tuple[float, float, int]:
    """(seconds, site-packages MB, distributions) of one install into a fresh venv."""
    with tempfile.TemporaryDirectory(dir=work) as scratch:
        venv = Path(scratch) / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        target = f"{project}[{extras}]" if extras else str(project)
        started = time.perf_counter()
        subprocess.run(
            [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", target],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        seconds = time.perf_counter() - started
        packages = site_packages(venv)
        megabytes = folder_bytes(packages) / 1e6
        distributions = len(list(packages.glob("*.dist-info")))
        return seconds, megabytes, distributions


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="a commit (e.g. the main branch)")
    parser.add_argument("--after", default="HEAD", help="a commit (default HEAD)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--extras", default="", help="e.g. local: install PROJECT[local]")
    args = parser.parse_args(argv)

    session = Session(runs=args.runs).start()
    print(f"pip: {sys.executable} -m pip install -q PROJECT, as configured (pip config list)")
    with tempfile.TemporaryDirectory() as work_dir:
        work = Path(work_dir)
        sides = {
            "before": export(args.before, work / "before"),
            "after": export(args.after, work / "after"),
        }
        sizes: dict[str, list[float]] = {name: [] for name in sides}
        counts: dict[str, list[float]] = {name: [] for name in sides}

        def installer(name: str) -> object:
            def run() -> float:
                seconds, megabytes, distributions = install_once(sides[name], args.extras, work)
                sizes[name].append(megabytes)
                counts[name].append(distributions)
                return seconds

            return run

        figures = session.rounds(
            {name: installer(name) for name in sides},
            measure=lambda action: float(action()),  # type: ignore[arg-type]
        )
    for name, rev in (("before", args.before), ("after", args.after)):
        print(f"{name} ({rev}{'[' + args.extras + ']' if args.extras else ''}):")
        print(f"  install wall s      {figures[name].text('{:.1f}', 's')}")
        print(f"  site-packages MB    {Figure.of(sizes[name]).text('{:.0f}', 'MB')}")
        print(f"  distributions       {Figure.of(counts[name]).text('{:.0f}')}")
    session.finish()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
