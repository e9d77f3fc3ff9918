"""`fixture repair --write`: apply a proposal's remaps and area moves to the fixture file."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from brain_pipeline.evaluation.repair import RepairProposal


def repair_comment(
    remaps: Mapping[str, str], when: str, moves: Mapping[tuple[str, str], str] | None = None
) -> str:
    """The `$comment` line recording what `--write` remapped and which queries it moved."""
    parts = []
    if remaps:
        pairs = ", ".join(f"{old} -> {new}" for old, new in remaps.items())
        parts.append(f"remapped {len(remaps)} stale id(s): {pairs}")
    if moves:
        pairs = ", ".join(f"{q!r} {old} -> {new}" for (q, old), new in moves.items())
        parts.append(f"moved {len(moves)} query(ies) to the area of their labels: {pairs}")
    return f"{when}: brain-pipeline fixture repair " + "; ".join(parts)


@dataclass(frozen=True)
class WrittenRepair:
    """What `write_repair` changed: the remaps, where the backup went, the comment line."""

    remaps: dict[str, str]
    replaced: dict[str, int]
    backup: str | None
    comment: str | None
    moves: dict[tuple[str, str], str] = field(default_factory=dict)


def write_repair(path: Path | str, proposal: RepairProposal, when: str) -> WrittenRepair:
    """Apply the proposal's remaps to the fixture file as text (layout kept), atomically.

    Each quoted old id is replaced by the new one, one line saying so is appended to the
    `$comment` array, the edited text is re-validated, the previous file is kept as
    `<file>.bak`, and the file is replaced atomically. Nothing to apply: nothing written.
    """
    from brain_pipeline.evaluation.fixture_edit import (
        FixtureEditError,
        add_comment,
        replace_ids,
        set_query_areas,
        write_fixture_text,
    )

    remaps, moves = proposal.remaps, proposal.area_moves
    if not remaps and not moves:
        return WrittenRepair({}, {}, None, None)
    target = Path(path)
    original = target.read_bytes()
    text, replaced = replace_ids(original.decode("utf-8"), remaps)
    missing = [old for old, count in replaced.items() if count == 0]
    if missing:
        raise FixtureEditError(
            f"{target}: id(s) {', '.join(missing)} not found in any relevant list"
        )
    text, moved = set_query_areas(text, moves)
    if moved != len(moves):
        raise FixtureEditError(f"{target}: a query to move was not found; run again")
    comment = repair_comment(remaps, when, moves)
    text = add_comment(text, comment)
    _, backup = write_fixture_text(target, original, text)
    return WrittenRepair(dict(remaps), replaced, str(backup), comment, dict(moves))
