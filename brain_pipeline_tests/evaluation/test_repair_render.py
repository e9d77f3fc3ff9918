"""A repair proposal rendered for the check's metadata, JSON, markdown and the terminal:
what each shows for a label `--write` fixes, one a person must settle, and a fixture
labelled on another corpus."""

from __future__ import annotations

import json

from brain_pipeline.evaluation.fixture import Fixture, LabelledQuery
from brain_pipeline.evaluation.repair import (
    AMBIGUOUS,
    APPLY,
    REPAIR_COMMAND,
    Candidate,
    ForeignFixture,
    RepairProposal,
    RepairRow,
    propose_repair,
)
from brain_pipeline.evaluation.repair_render import (
    proposal_json,
    proposal_markdown,
    proposal_metadata,
    proposal_rows,
    proposal_text,
)
from brain_pipeline_tests.evaluation.helpers import make_chunk

OLD, NEW, OTHER = "aaaaaaaaaaaa", "bbbbbbbbbbbb", "cccccccccccc"


def _fixed() -> RepairRow:
    return RepairRow(
        "undo a delete | s3",
        "aws",
        OLD,
        NEW,
        0.97654,
        APPLY,
        "light edit",
        old_source="aws/s3.md",
        old_excerpt="Amazon S3 versioning keeps",
        new_excerpt="Amazon S3 versioning keeps\nevery",
        candidates=[Candidate(NEW, 0.97654, "aws/s3.md", "", "Amazon S3 versioning keeps")],
    )


def _ambiguous() -> RepairRow:
    candidates = [
        Candidate(NEW, 0.91, "aws/s3.md", "Versioning", "S3 versioning keeps"),
        Candidate(OTHER, 0.9, "aws/s3.md", "", "Amazon S3 keeps"),
    ]
    return RepairRow(
        "versions",
        "aws",
        "dddddddddddd",
        None,
        None,
        AMBIGUOUS,
        "two candidates are as close",
        candidates=candidates,
    )


def test_rows_are_flat_values_for_a_table() -> None:
    fixed, ambiguous = proposal_rows(RepairProposal("eval.json", [_fixed(), _ambiguous()]))
    assert (fixed["proposed_id"], fixed["similarity"]) == (NEW, 0.977)
    assert fixed["candidates"] == f"{NEW} (0.98)"
    assert (ambiguous["proposed_id"], ambiguous["similarity"]) == ("", None)
    assert ambiguous["candidates"] == f"{NEW} (0.91); {OTHER} (0.90)"


def test_metadata_gives_the_command_only_when_write_would_change_something() -> None:
    both = proposal_metadata(RepairProposal("eval.json", [_fixed(), _ambiguous()]))
    assert (both["stale_labels"], both["auto_repairable"], both["need_a_person"]) == (2, 1, 1)
    assert both["repair_command"] == REPAIR_COMMAND
    assert both["repair_proposal"].startswith("**Stale labels** in `eval.json`: 2 stale")
    person_only = proposal_metadata(RepairProposal("eval.json", [_ambiguous()]))
    assert person_only["repair_command"] == "" and person_only["auto_repairable"] == 0


def test_markdown_keeps_the_table_whole_and_lists_what_a_person_runs() -> None:
    markdown = proposal_markdown(RepairProposal("eval.json", [_fixed(), _ambiguous()]))
    rows = [line for line in markdown.splitlines() if line.startswith("| ")]
    assert len(rows) == 3 and all(row.count(" | ") == 6 for row in rows)  # a pipe is escaped
    assert f"| undo a delete \\| s3 | aws | `{OLD}` → `{NEW}` | 0.98 |" in rows[1]
    assert "Amazon S3 versioning keeps every |" in rows[1]  # the newline is a space
    assert f"| `dddddddddddd` → `—` | — | {AMBIGUOUS}: two candidates" in rows[2]
    assert f"Apply the automatic repairs: `{REPAIR_COMMAND}`" in markdown
    (person,) = [line for line in markdown.splitlines() if line.startswith("- ")]
    assert person.startswith("- `dddddddddddd` (versions): two candidates are as close. ")
    assert f"`{NEW}` 0.91 (aws/s3.md), `{OTHER}` 0.90 (aws/s3.md)" in person
    assert "`brain-pipeline fixture label versions --area aws --remove dddddddddddd" in person


def test_markdown_of_nothing_stale_is_the_summary_line() -> None:
    assert proposal_markdown(RepairProposal("eval.json", [])) == (
        "**Stale labels** in `eval.json`: 0 stale label(s): 0 can be repaired "
        "automatically, 0 need a person.\n"
    )


def test_json_carries_the_remaps_rows_and_next_steps() -> None:
    data = json.loads(proposal_json(RepairProposal("eval.json", [_fixed(), _ambiguous()])))
    assert data["remaps"] == {OLD: NEW} and data["foreign"] is None
    assert [row["verdict"] for row in data["rows"]] == [APPLY, AMBIGUOUS]
    assert data["next_steps"][0] == f"apply the automatic repairs: {REPAIR_COMMAND}"


def test_text_shows_candidates_only_for_what_a_person_decides() -> None:
    text = proposal_text(RepairProposal("eval.json", [_fixed(), _ambiguous()]))
    assert f"  old {OLD}  aws/s3.md" in text and f"  new {NEW}  coverage 0.98" in text
    assert "  old dddddddddddd  (source unknown)" in text
    assert text.count("    candidate ") == 2  # not the fixed label's own candidate
    assert f"    candidate {NEW}  0.91  aws/s3.md § Versioning" in text
    assert f"    candidate {OTHER}  0.90  aws/s3.md\n" in text


def test_a_foreign_fixture_is_explained_instead_of_a_table() -> None:
    proposal = RepairProposal("eval.json", [_ambiguous()], foreign=ForeignFixture(9, 10))
    markdown = proposal_markdown(proposal)
    assert "|" not in markdown and "`eval.json`: 9 of its 10 labelled ids" in markdown
    assert proposal_text(proposal).splitlines()[0].startswith("eval.json: 9 of its 10")
    assert json.loads(proposal_json(proposal))["foreign"] == {"unknown": 9, "total": 10}


PARAGRAPH = (
    "Amazon S3 versioning keeps every version of an object, so an overwrite or a delete "
    "can be undone by restoring an earlier version of that object."
)


def test_a_proposal_from_a_real_edit_renders_for_the_check_metadata() -> None:
    old = make_chunk(PARAGRAPH, source="aws/s3.md", heading="Versioning")
    new = make_chunk(PARAGRAPH.replace("restoring", "restorng"), source="aws/s3.md")
    other = make_chunk(
        "Lifecycle rules move objects to colder storage classes.", source="aws/s3.md"
    )
    fixture = Fixture((LabelledQuery("undo a delete | s3", "aws", (old.id,)),))
    proposal = propose_repair(fixture, [new, other], {old.id: old})
    (row,) = proposal_rows(proposal)
    assert (row["old_id"], row["proposed_id"], row["verdict"]) == (old.id, new.id, APPLY)
    assert row["similarity"] > 0.95 and row["old_excerpt"].startswith("Amazon S3 versioning")
    markdown = proposal_markdown(proposal)
    assert f"`{old.id}` → `{new.id}`" in markdown
    assert "undo a delete \\| s3" in markdown  # the pipe cannot break the table
    assert "`brain-pipeline fixture repair --write`" in markdown
    assert json.loads(proposal_json(proposal))["remaps"] == {old.id: new.id}
    metadata = proposal_metadata(proposal)
    assert (metadata["stale_labels"], metadata["auto_repairable"]) == (1, 1)
    assert metadata["repair_command"] == "brain-pipeline fixture repair --write"
