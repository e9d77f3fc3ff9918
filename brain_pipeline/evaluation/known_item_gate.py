"""The known-item check: can the agent still find what it found at the last publication?

`judge_known_items` asks each known item of the baseline (evaluation/known_items.py,
saved when the store was published) of the current store with the agent's retriever,
and judges the answers per area:

- **found**: the target, or its *successor*, is in the top 10. A successor is the chunk
  of the same file under the same heading that keeps at least `SUCCESSOR_COVERAGE` of
  the target's text (fixture.similarity.coverage): an edited paragraph is still the
  answer.
- **lost content**: the target is gone and has no successor: the text is not in the
  store any more, whatever retrieval does.
- **lost retrieval**: the text is still there (target or successor) but no longer in the
  top 10; the files whose chunks entered the top 10 are named: they displaced it.

Per area it **blocks** when the area disappeared, when it lost more than `max_area_loss`
of its chunks (or of its known items' text), or when found@10 (over all its known items:
lost content is not found either) fell by more than `max_found_drop` and the paired
bootstrap interval of the change excludes zero. It **warns** when a drop or a loss is
notable without blocking (the drop over the margin inside the noise, or more than half
the allowed loss). A
renamed area (its passages all live in one other area) is asked in its new name, and
said so. Pure: the store is a `ChunkSource`, the retriever a function, nothing is read
from or written to disk.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from brain_pipeline.corpus.store import Chunk, heading_text
from brain_pipeline.evaluation.bootstrap import paired_difference
from brain_pipeline.evaluation.fixture.similarity import coverage
from brain_pipeline.evaluation.known_items import KnownItem
from brain_pipeline.retrieval.hybrid import ChunkSource

K = 10
SUCCESSOR_COVERAGE = 0.5
"""An edited passage is its old self's successor when it keeps most of the old text."""
PREFIX = "known items: "
ACCEPT_HINT = " (accept with `brain-pipeline eval --accept --note ...`)"
_NAMED = 5
"""Queries and files named per message (then "+N more")."""

Ranker = Callable[[str, str], Sequence[str]]
"""(query, area) -> the agent's top-10 chunk ids."""


@dataclass(frozen=True)
class KnownItemSettings:
    """The configured bounds (config.KnownItemSettings, as plain values)."""

    max_found_drop: float = 0.10
    max_area_loss: float = 0.25


@dataclass(frozen=True)
class KnownItemBaseline:
    """The known items of the last publication and its chunk count per area."""

    items: tuple[KnownItem, ...]
    area_chunks: Mapping[str, int]
    describe: str
    """One line: which publication (or acceptance) this is."""
    candidate: str | None = None
    """The key of the evaluation whose candidate it was copied from (a verdict judged
    against its own known items is recognised)."""
    digest: str | None = None
    """Digest of its items and chunk counts: what a verdict judged against it is keyed by
    (evaluation.verdict_rule), so a verdict counts only against these known items."""


@dataclass(frozen=True)
class ItemOutcome:
    """One known item asked again."""

    area: str
    asked_in: str
    target: str
    query: str
    source: str
    before: int | None
    """Rank at the baseline (None: not in the top 10 then)."""
    rank: int | None
    status: str
    """"found", "missed" or "lost_content"."""
    answer: str | None = None
    """The id that answers now: the target, or its successor."""
    displaced_by: tuple[str, ...] = ()
    """Files whose chunks entered the top 10 (for a query that became a miss)."""

    @property
    def became_miss(self) -> bool:
        return self.before is not None and self.status == "missed"


@dataclass(frozen=True)
class AreaOutcome:
    """One area's known items: counts, found@10 before and now, the paired change."""

    area: str
    asked_in: str | None
    """Where the items were asked (another name after a rename; None: the area is gone)."""
    items: int
    found_before: int
    found_now: int
    lost_content: int
    lost_retrieval: int
    chunks_before: int
    chunks_now: int
    change: float = 0.0
    change_low: float = 0.0
    change_high: float = 0.0
    """Paired change of found@10 over the area's known items, a passage whose text is gone
    counting as not found (negative: a drop)."""
    verdict: str = "pass"
    """"pass", "warn" or "block"."""

    @property
    def found_at_10(self) -> float:
        return self.found_now / self.items if self.items else 0.0

    @property
    def found_at_10_before(self) -> float:
        return self.found_before / self.items if self.items else 0.0


@dataclass(frozen=True)
class KnownItemVerdict:
    """What the known-item check found and decided; `failures` block, `warnings` warn."""

    status: str
    """One line: the baseline compared with, or why there is none."""
    areas: tuple[AreaOutcome, ...] = ()
    items: tuple[ItemOutcome, ...] = ()
    failures: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def found(self) -> int:
        return sum(a.found_now for a in self.areas)

    @property
    def asked(self) -> int:
        return sum(a.items for a in self.areas)

    def summary(self) -> str:
        """E.g. "known items: found@10 118/120 in 4 areas (2 lost content)"."""
        if not self.areas:
            return PREFIX + self.status
        lost = sum(a.lost_content for a in self.areas)
        tail = f" ({lost} lost content)" if lost else ""
        return (
            f"{PREFIX}found@10 {self.found}/{self.asked} in {len(self.areas)} area(s){tail}"
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> KnownItemVerdict:
        return cls(
            status=str(data["status"]),
            areas=tuple(AreaOutcome(**a) for a in data.get("areas", ())),
            items=tuple(
                ItemOutcome(**{**i, "displaced_by": tuple(i.get("displaced_by", ()))})
                for i in data.get("items", ())
            ),
            failures=tuple(str(f) for f in data.get("failures", ())),
            warnings=tuple(str(w) for w in data.get("warnings", ())),
            notes=tuple(str(n) for n in data.get("notes", ())),
        )


def no_baseline(reason: str) -> KnownItemVerdict:
    """Nothing to compare with (a store from before this check, or never published): pass."""
    return KnownItemVerdict(status=reason)


def _rank(top: Sequence[str], answer: str) -> int | None:
    for position, chunk_id in enumerate(top[:K]):
        if chunk_id == answer:
            return position + 1
    return None


def _more(names: Sequence[str]) -> str:
    shown = ", ".join(names[:_NAMED])
    return shown + (f" (+{len(names) - _NAMED} more)" if len(names) > _NAMED else "")


class _Area:
    """The current store's view of one area: live ids, and chunks by (file, heading)."""

    def __init__(self, source: ChunkSource, area: str) -> None:
        self.source = source
        self.area = area
        self.ids = set(source.area_ids(area))
        self._by_place: dict[tuple[str, str], list[Chunk]] | None = None

    def successor(self, item: KnownItem) -> str | None:
        """The chunk of the same file and heading keeping most of the item's text."""
        if self._by_place is None:
            self._by_place = {}
            for chunk in self.source.area_chunks(self.area):
                key = (chunk.source, heading_text(chunk.heading))
                self._by_place.setdefault(key, []).append(chunk)
        best: tuple[float, str] | None = None
        for chunk in self._by_place.get((item.source, item.heading), []):
            score = coverage(item.text, chunk.content[: 2 * len(item.text) + 200])
            if score >= SUCCESSOR_COVERAGE and (best is None or score > best[0]):
                best = (score, chunk.id)
        return best[1] if best else None

    def files_of(self, ids: Sequence[str]) -> list[str]:
        files: list[str] = []
        for chunk_id in ids:
            try:
                name = self.source.chunk(self.area, chunk_id).source
            except KeyError:
                continue
            if name not in files:
                files.append(name)
        return files


def _renamed(
    area: str, items: Sequence[KnownItem], current: Mapping[str, _Area]
) -> str | None:
    """The one current area holding most of `area`'s known passages (a rename), or None."""
    if not items:
        return None
    counts = {
        name: sum(1 for item in items if item.target in view.ids)
        for name, view in current.items()
    }
    best = max(counts, key=lambda name: (counts[name], name), default=None)
    if best is None or counts[best] * 2 < len(items):
        return None
    return best


def _ask(item: KnownItem, view: _Area, ranker: Ranker) -> ItemOutcome:
    answer: str | None = item.target if item.target in view.ids else view.successor(item)
    if answer is None:
        return ItemOutcome(
            item.area, view.area, item.target, item.query, item.source, item.rank, None,
            "lost_content",
        )
    top = list(ranker(item.query, view.area))
    rank = _rank(top, answer)
    displaced: tuple[str, ...] = ()
    if rank is None and item.rank is not None:
        entered = [i for i in top[:K] if i not in set(item.top)]
        displaced = tuple(view.files_of(entered or top[:K]))
    return ItemOutcome(
        item.area, view.area, item.target, item.query, item.source, item.rank, rank,
        "found" if rank is not None else "missed", answer, displaced,
    )


def _miss_text(outcome: ItemOutcome) -> str:
    by = f"; displaced by {_more(list(outcome.displaced_by))}" if outcome.displaced_by else ""
    return f"{outcome.query!r} (answer in {outcome.source}, was rank {outcome.before}{by})"


def _judge_area(
    area: str,
    asked_in: str | None,
    outcomes: Sequence[ItemOutcome],
    chunks_before: int,
    chunks_now: int,
    settings: KnownItemSettings,
) -> tuple[AreaOutcome, list[str], list[str]]:
    """The area's figures, and its blocking and warning sentences."""
    lost = [o for o in outcomes if o.status == "lost_content"]
    misses = [o for o in outcomes if o.became_miss]  # lost content is not "missed"
    found_before = sum(1 for o in outcomes if o.before is not None)
    found_now = sum(1 for o in outcomes if o.rank is not None)
    change = low = high = 0.0
    if outcomes:
        # Over every known item: a passage whose text is gone is not found either.
        interval = paired_difference(
            [1.0 if o.rank is not None else 0.0 for o in outcomes],
            [1.0 if o.before is not None else 0.0 for o in outcomes],
        )
        change, low, high = interval.value, interval.low, interval.high
    blocks: list[str] = []
    warns: list[str] = []
    gone_files = list(dict.fromkeys(o.source for o in lost))
    gone = f"; text gone from {_more(gone_files)}" if gone_files else ""
    if asked_in is None:
        blocks.append(
            f"area {area} disappeared: its {chunks_before} chunk(s) are gone{gone}"
        )
    chunk_loss = (chunks_before - chunks_now) / chunks_before if chunks_before else 0.0
    content_loss = len(lost) / len(outcomes) if outcomes else 0.0
    allowed = settings.max_area_loss
    if asked_in is not None and max(chunk_loss, content_loss) > allowed:
        blocks.append(
            f"area {area} lost {chunk_loss:.0%} of its chunks ({chunks_before} -> {chunks_now}) "
            f"and the text of {len(lost)}/{len(outcomes)} known items, more than the "
            f"{allowed:.0%} allowed{gone}"
        )
    elif asked_in is not None and max(chunk_loss, content_loss) > allowed / 2:
        warns.append(
            f"area {area} lost {chunk_loss:.0%} of its chunks ({chunks_before} -> {chunks_now}) "
            f"and the text of {len(lost)}/{len(outcomes)} known items{gone}"
        )
    drop = -change
    # When the loss already blocks and no retrieval was lost, the drop says nothing new.
    redundant = bool(blocks) and not misses
    if outcomes and drop > settings.max_found_drop and not redundant:
        n = len(outcomes)
        named = "; ".join(_miss_text(o) for o in misses[:_NAMED])
        more = f" (+{len(misses) - _NAMED} more)" if len(misses) > _NAMED else ""
        sentence = (
            f"area {area}: found@10 fell from {found_before}/{n} to {found_now}/{n} "
            f"({change:+.3f}, 95% {low:+.3f} to {high:+.3f}; allowed drop "
            f"{settings.max_found_drop:.2f}); {len(lost)} lost content, {len(misses)} "
            f"became misses{': ' + named + more if misses else ''}{gone}"
        )
        if high < 0:
            blocks.append(sentence)
        else:
            warns.append(sentence + " (within the noise)")
    verdict = "block" if blocks else "warn" if warns else "pass"
    row = AreaOutcome(
        area=area,
        asked_in=asked_in,
        items=len(outcomes),
        found_before=found_before,
        found_now=found_now,
        lost_content=len(lost),
        lost_retrieval=len(misses),
        chunks_before=chunks_before,
        chunks_now=chunks_now,
        change=round(change, 6),
        change_low=round(low, 6),
        change_high=round(high, 6),
        verdict=verdict,
    )
    return row, blocks, warns


def judge_known_items(
    baseline: KnownItemBaseline,
    source: ChunkSource,
    ranker: Ranker,
    settings: KnownItemSettings = KnownItemSettings(),
) -> KnownItemVerdict:
    """Ask the baseline's known items of `source` and judge them (see the module doc)."""
    current = {area: _Area(source, area) for area in source.areas()}
    by_area: dict[str, list[KnownItem]] = {}
    for item in baseline.items:
        by_area.setdefault(item.area, []).append(item)
    names = sorted(set(baseline.area_chunks) | set(by_area))
    failures: list[str] = []
    warnings: list[str] = []
    notes: list[str] = []
    rows: list[AreaOutcome] = []
    outcomes: list[ItemOutcome] = []
    asked_areas: set[str] = set()
    for area in names:
        items = by_area.get(area, [])
        asked_in: str | None = area if area in current else _renamed(area, items, current)
        if asked_in is not None and asked_in != area:
            notes.append(
                f"area {area} is now {asked_in} (its known passages live there): "
                f"its known items were asked in {asked_in}"
            )
        if asked_in is None:
            own = [
                ItemOutcome(i.area, "", i.target, i.query, i.source, i.rank, None,
                            "lost_content")
                for i in items
            ]
            chunks_now = 0
        else:
            asked_areas.add(asked_in)
            own = [_ask(item, current[asked_in], ranker) for item in items]
            chunks_now = len(current[asked_in].ids)
        row, blocks, warns = _judge_area(
            area, asked_in, own, int(baseline.area_chunks.get(area, len(items))), chunks_now,
            settings,
        )
        failures.extend(PREFIX + b + ACCEPT_HINT for b in blocks)
        warnings.extend(PREFIX + w for w in warns)
        rows.append(row)
        outcomes.extend(own)
    for area in sorted(set(current) - asked_areas - set(names)):
        notes.append(
            f"area {area} is new since the baseline: no known items yet (the next "
            "publication samples it)"
        )
    return KnownItemVerdict(
        status=baseline.describe,
        areas=tuple(rows),
        items=tuple(outcomes),
        failures=tuple(failures),
        warnings=tuple(warnings),
        notes=tuple(notes),
    )


@dataclass
class RankMemo:
    """A ranker that asks each (query, area) once, with an optional cache it fills."""

    ranker: Ranker
    answers: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    asked: int = 0
    """Queries actually run (not answered from the cache)."""

    def __call__(self, query: str, area: str) -> list[str]:
        key = (query, area)
        found = self.answers.get(key)
        if found is None:
            found = self.answers[key] = list(self.ranker(query, area))[:K]
            self.asked += 1
        return found


def with_ranks(items: Sequence[KnownItem], ranker: Ranker) -> list[KnownItem]:
    """The items with their rank and top 10 on the store `ranker` searches (a sample made
    for the next baseline)."""
    out: list[KnownItem] = []
    for item in items:
        top = tuple(ranker(item.query, item.area))[:K]
        out.append(
            KnownItem(
                item.area, item.target, item.query, item.source, item.heading, item.text,
                _rank(top, item.target), top,
            )
        )
    return out


TABLE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("area", "string"),
    ("items", "int"),
    ("found_before", "int"),
    ("found_now", "int"),
    ("found_at_10", "float"),
    ("lost_content", "int"),
    ("lost_retrieval", "int"),
    ("chunks_before", "int"),
    ("chunks_now", "int"),
    ("verdict", "string"),
)
"""The per-area table (`eval` prints it, the check's metadata carries it)."""


def table_rows(verdict: KnownItemVerdict) -> list[list[Any]]:
    return [
        [
            a.area if a.asked_in in (None, a.area) else f"{a.area} -> {a.asked_in}",
            a.items, a.found_before, a.found_now, round(a.found_at_10, 4),
            a.lost_content, a.lost_retrieval, a.chunks_before, a.chunks_now, a.verdict,
        ]
        for a in verdict.areas
    ]


def table_lines(verdict: KnownItemVerdict) -> list[str]:
    """The found@10-per-area table as text, headed by what it compares with."""
    lines = [f"known items ({verdict.status}):"]
    rows = table_rows(verdict)
    if rows:
        header = ["area", "items", "found before", "found now", "found@10", "lost content",
                  "lost retrieval", "chunks before", "chunks now", "verdict"]
        cells = [header, *[[f"{v:.3f}" if isinstance(v, float) else str(v) for v in row]
                           for row in rows]]
        widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
        for row in cells:
            lines.append("  " + "  ".join(
                v.ljust(w) if i == 0 else v.rjust(w)
                for i, (v, w) in enumerate(zip(row, widths, strict=True))
            ))
    lines.extend(f"  {note}" for note in verdict.notes)
    return lines
