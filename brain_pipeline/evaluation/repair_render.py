"""The renderings of a RepairProposal: table rows, check metadata, JSON, markdown, text."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from brain_pipeline.evaluation.repair import RepairProposal
from brain_pipeline.evaluation.similarity import SCORE_HELP


def proposal_rows(proposal: RepairProposal) -> list[dict[str, Any]]:
    """Flat rows (strings and numbers) for a table in Dagster metadata or JSON."""
    return [
        {
            "query": r.query,
            "area": r.area,
            "old_id": r.old_id,
            "proposed_id": r.proposed_id or "",
            "similarity": round(r.similarity, 3) if r.similarity is not None else None,
            "verdict": r.verdict,
            "reason": r.reason,
            "old_excerpt": r.old_excerpt,
            "new_excerpt": r.new_excerpt,
            "candidates": "; ".join(f"{c.id} ({c.similarity:.2f})" for c in r.candidates),
        }
        for r in proposal.rows
    ]


def proposal_metadata(proposal: RepairProposal) -> dict[str, Any]:
    """Plain values for the failing check's metadata (wrap `repair_proposal` as markdown).

    `repair_command` is set only when there is something `--write` would apply.
    """
    return {
        "stale_labels": len(proposal.rows),
        "auto_repairable": len(proposal.remaps),
        "need_a_person": len(proposal.for_human),
        "repair_proposal": proposal_markdown(proposal),
        "repair_command": proposal.command if proposal.writable else "",
    }


def proposal_dict(proposal: RepairProposal) -> dict[str, Any]:
    return {
        "fixture": proposal.fixture,
        "summary": proposal.summary(),
        "score": SCORE_HELP,
        "min_similarity": proposal.min_similarity,
        "margin": proposal.margin,
        "split_gain": proposal.split_gain,
        "remaps": proposal.remaps,
        "area_moves": [asdict(m) for m in proposal.moves],
        "foreign": asdict(proposal.foreign) if proposal.foreign else None,
        "command": proposal.command,
        "next_steps": proposal.next_steps(),
        "rows": [asdict(r) for r in proposal.rows],
    }


def proposal_json(proposal: RepairProposal) -> str:
    return json.dumps(proposal_dict(proposal), indent=2, ensure_ascii=False)


def proposal_markdown(proposal: RepairProposal) -> str:
    """The table the failing check shows, the command to apply it, and what is left."""
    if proposal.foreign is not None:
        return "\n\n".join(proposal.foreign.lines(f"`{proposal.fixture}`")) + "\n"
    lines = [f"**Stale labels** in `{proposal.fixture}`: {proposal.summary()}.", ""]
    if not proposal.rows:
        return "\n".join(lines)
    lines += [
        "| query | area | old id → proposed id | coverage | verdict | old text | new text |",
        "|---|---|---|---:|---|---|---|",
    ]
    for r in proposal.rows:
        target = r.proposed_id or "—"
        score = f"{r.similarity:.2f}" if r.similarity is not None else "—"
        cells = [
            r.query,
            r.area,
            f"`{r.old_id}` → `{target}`",
            score,
            f"{r.verdict}: {r.reason}",
            r.old_excerpt,
            r.new_excerpt,
        ]
        lines.append("| " + " | ".join(_md(c) for c in cells) + " |")
    if proposal.writable:
        lines += ["", f"Apply the automatic repairs: `{proposal.command}`"]
    human = proposal.for_human
    if human:
        lines += [
            "",
            "For a person (top candidates; relabel with `brain-pipeline fixture label`):",
        ]
        for r in human:
            tops = ", ".join(f"`{c.id}` {c.similarity:.2f} ({c.source})" for c in r.candidates)
            lines.append(
                f"- `{r.old_id}` ({r.query}): {r.reason}. {tops or 'no candidate'}. "
                f"`{r.fix_command()}`"
            )
    return "\n".join(lines) + "\n"


def proposal_text(proposal: RepairProposal) -> str:
    """The terminal version: one block per stale label (two lines for a foreign fixture)."""
    if proposal.foreign is not None:
        return "\n".join(proposal.foreign.lines(proposal.fixture))
    lines = [proposal.summary()]
    for r in proposal.rows:
        lines.append("")
        lines.append(f"[{r.verdict}] {r.query!r} ({r.area})")
        lines.append(f"  old {r.old_id}  {r.old_source or '(source unknown)'}")
        if r.old_excerpt:
            lines.append(f"      {r.old_excerpt}")
        if r.proposed_id:
            lines.append(f"  new {r.proposed_id}  coverage {r.similarity:.2f}")
            lines.append(f"      {r.new_excerpt}")
        lines.append(f"  {r.reason}")
        if not r.applies:
            for c in r.candidates:
                where = f"{c.source} § {c.heading}" if c.heading else c.source
                lines.append(f"    candidate {c.id}  {c.similarity:.2f}  {where}")
                lines.append(f"      {c.excerpt}")
    return "\n".join(lines)


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
