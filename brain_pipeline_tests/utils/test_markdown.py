"""utils.markdown: text that is not ours renders as itself in the UI's Markdown."""

from __future__ import annotations

import pytest

from brain_pipeline.utils.markdown import md_code, md_defanged, md_text, md_undefanged


def test_links_images_html_and_autolinks_are_escaped() -> None:
    assert md_text("![x](http://evil/p.png)") == "\\!\\[x\\]\\(http\\://evil/p.png\\)"
    assert md_text("<b>&amp; www.evil.com a@b.c") == "\\<b\\>\\&amp; www\\.evil.com a\\@b.c"
    assert md_text("*em* _em_ ~~s~~ `code` # h \\") == (
        "\\*em\\* \\_em\\_ \\~\\~s\\~\\~ \\`code\\` \\# h \\\\"
    )


def test_a_table_cell_stays_one_cell_on_one_line() -> None:
    assert md_text("a | b\nc\r\nd\re") == "a \\| b c d e"


def test_control_characters_become_visible_escapes() -> None:
    assert md_text("a\x1b[2Kb") == "a\\\\u001b\\[2Kb"


def test_plain_prose_is_left_readable() -> None:
    text = "Amazon S3 versioning keeps every version: restore one, 2.5 % of 10."
    assert md_text(text) == text


def test_a_code_span_cannot_be_closed_from_inside() -> None:
    assert md_code("fixture label `x`") == "`` fixture label `x` ``"
    assert md_code("run ``this``") == "``` run ``this`` ```"
    assert md_code("a|b", in_table=True) == "`a\\|b`"
    assert md_code("`start") == "`` `start ``"


def test_a_defanged_sentence_keeps_its_punctuation_but_links_nothing() -> None:
    sentence = "area(s) empty: ![x](http://evil/p.png); [a](www.evil.com) <b>&amp; `ok` x@y.z"
    assert md_defanged(sentence) == (
        "area(s) empty: !\\[x\\](http\\://evil/p.png); \\[a\\](www\\.evil.com) "
        "\\<b\\>\\&amp; `ok` x\\@y.z"
    )
    assert md_defanged("every area has chunks (3 files)") == "every area has chunks (3 files)"


@pytest.mark.parametrize(
    "text",
    [
        "first: alpha/table.md [bbb09fb9f1bb] refused (400 INVALID_ARGUMENT: requests[2])",
        "see http://evil.example/![x](y) <b>&amp; a@b www.x.com \\ back \\[kept",
    ],
)
def test_a_defanged_description_reads_as_written_on_the_terminal(text: str) -> None:
    defanged = md_defanged(text)
    assert "](" not in defanged.replace("\\]", "") and "<b>" not in defanged
    assert md_undefanged(defanged) == text
