"""The README's repair rule: a replacement is written only when it beats the next
candidate by `--margin` (default 0.15). Two near copies of an edited paragraph score
0.9653 and 0.9514 (a gap of 0.0139): the margin alone decides."""

from __future__ import annotations

import pytest

from brain_pipeline.evaluation.fixture import Fixture, LabelledQuery
from brain_pipeline.evaluation.repair import AMBIGUOUS, MARGIN, propose_repair
from brain_pipeline_tests.evaluation.helpers import make_chunk

PARAGRAPH = (
    "Amazon S3 versioning keeps every version of an object, so an overwrite or a delete "
    "can be undone by restoring an earlier version of that object."
)


@pytest.mark.parametrize(("margin", "applied"), [(MARGIN, False), (0.02, False), (0.01, True)])
def test_the_best_candidate_is_applied_only_when_ahead_by_the_margin(
    margin: float, applied: bool
) -> None:
    old = make_chunk(PARAGRAPH, source="aws/s3.md")
    fewer_words = make_chunk(PARAGRAPH.replace("Amazon S3", "S3"), source="aws/s3.md")
    one_word = make_chunk(PARAGRAPH.replace("earlier", "older"), source="aws/s3.md")
    fixture = Fixture((LabelledQuery("versions", "aws", (old.id,)),))
    proposal = propose_repair(fixture, [fewer_words, one_word], {old.id: old}, margin=margin)
    (row,) = proposal.rows
    scores = [c.similarity for c in row.candidates[:2]]
    assert row.candidates[0].id == one_word.id and 0.01 < scores[0] - scores[1] < 0.02
    if applied:
        assert proposal.remaps == {old.id: one_word.id}
    else:
        assert row.verdict == AMBIGUOUS and proposal.remaps == {}
    assert MARGIN == 0.15  # the documented default
