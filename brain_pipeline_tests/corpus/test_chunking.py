"""Text paragraphs and roadmap statements, one contract rule per test."""

from __future__ import annotations

import hashlib
import random
import re
from typing import Any

import pytest

from brain_pipeline.corpus.chunking import (
    REASON_CONVERSION,
    REASON_INVALID_JSON,
    REASON_NO_TITLE_TOPICS,
    REASON_NOT_ITERABLE,
    REASON_NOT_OBJECT,
    REASON_NULL_TOPIC,
    chunk_roadmap,
    chunk_text,
    decode_text,
    find_heading,
)
from brain_pipeline.corpus.jscompat import (
    JS_STRING_MAX_ARRAY_DEPTH,
    JS_STRINGIFY_MAX_DEPTH,
    JS_WHITESPACE,
    JS_WS_CLASS,
)
from brain_pipeline.corpus.junk import (
    OUTPUT_BOUND,
    REASON_OUTPUT_TOO_LARGE,
    REASON_TOO_DEEP,
    OutputBound,
)
from brain_pipeline.corpus.store import NO_HEADING, serialize_store

#: JavaScript line terminators: where `^`/`$` match in multi-line mode, what `.` refuses.
JS_LINE_TERMINATORS = "\n\r\u2028\u2029"
_NOT_TERMINATOR = f"[^{JS_LINE_TERMINATORS}]"
#: The specification: the original heading regex `/^\s*#{1,6}\s+(.+?)\s*$/m` with
#: JavaScript semantics (`^` at the start or after any line terminator, `$` at the end or
#: before one, `.` = anything but a line terminator). `find_heading` must agree with it.
HEADING_JS = re.compile(
    rf"(?<!{_NOT_TERMINATOR})[{JS_WS_CLASS}]*#{{1,6}}[{JS_WS_CLASS}]+"
    rf"({_NOT_TERMINATOR}+?)[{JS_WS_CLASS}]*(?!{_NOT_TERMINATOR})"
)

LONG = "This paragraph is comfortably longer than twenty characters."


def contents(text: str) -> list[str]:
    return [c.content for c in chunk_text(text, "a", "a/f.md")]


def headings(text: str) -> list[Any]:
    return [c.heading for c in chunk_text(text, "a", "a/f.md")]


# --- paragraphs and whitespace ------------------------------------------------------------


@pytest.mark.parametrize("space", ["", " ", "\t", "\u00a0", "\u3000", "\ufeff", "\u2028", "\v\f"])
def test_javascript_whitespace_lines_separate_paragraphs(space: str) -> None:
    assert contents(f"{LONG} one\n{space}\n{LONG} two") == [f"{LONG} one", f"{LONG} two"]


@pytest.mark.parametrize("char", ["\u0085", "\u001c", "\u001f", "\u200b"])
def test_python_only_whitespace_does_not_separate_or_trim(char: str) -> None:
    text = f"{LONG} one\n{char}\n{LONG} two"
    assert contents(text) == [text]
    assert contents(f"{char}{LONG}{char}") == [f"{char}{LONG}{char}"]


def test_trim_removes_bom_and_exotic_spaces() -> None:
    assert contents(f"\ufeff\u00a0\u2003{LONG}\u202f\u3000 ") == [LONG]


def test_crlf_is_kept_inside_a_chunk() -> None:
    assert contents(f"{LONG}\r\nsecond line\r\n\r\n{LONG}!\r\n") == [
        f"{LONG}\r\nsecond line",  # the split takes `\n\r\n`; the trim takes the last `\r`
        f"{LONG}!",
    ]


def test_length_floor_counts_utf16_code_units() -> None:
    assert contents("a" * 20) == []
    assert contents("a" * 21) == ["a" * 21]
    assert contents("😀" * 10) == []  # 20 code units
    assert contents("😀" * 10 + "a") == ["😀" * 10 + "a"]
    assert contents("é" * 20) == []  # BMP characters count one
    assert contents("  " + "a" * 20 + "  ") == []  # measured after the trim


def test_ids_are_sha256_prefixes_of_the_trimmed_content() -> None:
    [chunk] = chunk_text(f"  {LONG}  ", "area", "area/x.md")
    assert chunk.id == hashlib.sha256(LONG.encode()).hexdigest()[:12]
    assert (chunk.area, chunk.source) == ("area", "area/x.md")


def test_invalid_utf8_becomes_one_replacement_per_maximal_subpart() -> None:
    assert decode_text(b"a\xffb\xed\xa0\x80c\xf0\x9f\x98d\xc0\xafe") == (
        "a\ufffdb\ufffd\ufffd\ufffdc\ufffdd\ufffd\ufffde"
    )
    assert decode_text(b"\xef\xbb\xbfx") == "\ufeffx"  # the BOM is kept (the trim removes it)


# --- headings -----------------------------------------------------------------------------


def test_heading_applies_to_following_paragraphs_and_is_omitted_before() -> None:
    text = f"{LONG} 0\n\n# Intro\n\n{LONG} 1\n\n## Details\n\n{LONG} 2"
    assert headings(text) == [NO_HEADING, "Intro", "Details"]


def test_a_short_heading_paragraph_is_not_kept_but_sets_the_heading() -> None:
    assert contents(f"# Short\n\n{LONG}") == [LONG]
    assert headings(f"# H\n\nshort\n\n{LONG}") == ["H"]


def test_heading_inside_a_kept_paragraph_applies_to_it() -> None:
    assert headings(f"# Title line\n{LONG}") == ["Title line"]
    assert headings(f"{LONG}\n## Later heading\nmore") == ["Later heading"]


@pytest.mark.parametrize(
    ("paragraph", "expected"),
    [
        ("#\nText", "Text"),  # \s+ crosses the newline
        ("## Closing ##", "Closing ##"),
        ("#hashtag", None),
        ("####### seven", None),
        ("###### six", "six"),
        ("```\n# install deps\n```", "install deps"),  # code comments count, as originally
        ("   ##   Indented   ", "Indented"),
        ("#\u00a0NBSP", "NBSP"),
        ("#\u0085 NEL", None),  # U+0085 is not JavaScript whitespace
        ("# a\u2028b", "a"),  # `.` stops at U+2028
        ("x\u2029# after PS", "after PS"),  # `^` matches after U+2029
        ("x\r# after CR", "after CR"),
        ("# first\n# second", "first"),
        ("text # not at line start", None),
        ("# \n# Second", "# Second"),  # `\s+` crosses the line, `.+?` starts at its `#`
        ("#\t\u3000Ideographic\u3000 ", "Ideographic"),
    ],
)
def test_heading_rules(paragraph: str, expected: str | None) -> None:
    assert find_heading(paragraph.strip(JS_WHITESPACE)) == expected


def test_fast_heading_search_equals_the_javascript_regex(node: Any) -> None:
    rng = random.Random(5)
    alphabet = [
        "#",
        "#",
        "##",
        " ",
        "\t",
        "\n",
        "\r",
        "\u2028",
        "\u2029",
        "\u00a0",
        "a",
        "b c",
        "\u0085",
        "\ufeff",
        "```",
        "x#",
    ]
    samples: set[str] = set()
    while len(samples) < 2500:
        raw = "".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 14)))
        trimmed = raw.strip(JS_WHITESPACE)
        if trimmed:
            samples.add(trimmed)
    ordered = sorted(samples)
    expected = node(
        "return input.map(p=>{const m=p.match(/^\\s*#{1,6}\\s+(.+?)\\s*$/m);"
        "return m?m[1].trim():null});",
        ordered,
    )
    literal = []
    for paragraph in ordered:
        match = HEADING_JS.search(paragraph)
        literal.append(match.group(1).strip(JS_WHITESPACE) if match else None)
    assert literal == expected
    assert [find_heading(p) for p in ordered] == expected


# --- roadmaps -----------------------------------------------------------------------------


def roadmap(text: str) -> tuple[list[str], list[Any], str | None, bool]:
    outcome = chunk_roadmap(text, "r", "r/formatted-x.json")
    return (
        [c.content for c in outcome.chunks],
        [c.heading for c in outcome.chunks],
        outcome.reason,
        outcome.problem,
    )


def test_roadmap_role_line_then_labelled_topics() -> None:
    text = (
        '{"title": "Dev", "description": "Builds", "topics": ['
        '{"label": "Git", "type": "topic", "level": "beginner"},'
        '{"label": "Branches", "type": "subtopic"},'
        '{"label": "Intro", "type": "title", "level": 0},'
        '{"label": "Prose", "type": "paragraph"},'
        '{"label": "", "type": "topic"},'
        '{"label": "Case", "type": "Topic"}]}'
    )
    assert roadmap(text) == (
        [
            "Role: Dev - Description: Builds",
            "Role: Dev - Topic: Git (beginner)",
            "Role: Dev - Topic: Branches",
            "Role: Dev - Topic: Intro",
        ],
        ["Dev"] * 4,
        None,
        False,
    )


def test_roadmap_lines_have_no_length_floor_and_missing_description_is_empty() -> None:
    lines, _, _, _ = roadmap('{"title": "T", "topics": [{"label": "L", "type": "topic"}]}')
    assert lines == ["Role: T - Description: ", "Role: T - Topic: L"]


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("42", "42"),
        ("1e21", "1e+21"),
        ("1e-7", "1e-7"),
        ("0.000001", "0.000001"),
        ("12345678901234567890", "12345678901234567000"),
        ("2.50", "2.5"),
        ("true", "true"),
        ('[null,"a",[1,[2,null]]]', ",a,1,2,"),
        ("[]", ""),
        ('{"a": 1}', "[object Object]"),
        ("1e400", "Infinity"),
    ],
)
def test_roadmap_values_convert_like_javascript_string(value: str, text: str) -> None:
    lines, heads, _, _ = roadmap(
        f'{{"title": {value}, "topics": [{{"label": {value}, "type": "topic", "level": {value}}}]}}'
    )
    assert lines == [f"Role: {text} - Description: ", f"Role: {text} - Topic: {text} ({text})"]


def test_roadmap_heading_is_the_raw_title_value() -> None:
    _, heads, _, _ = roadmap('{"title": [1, "a"], "topics": []}')
    assert heads == [[1.0, "a"]]
    _, heads, _, _ = roadmap('{"title": 7, "topics": []}')
    assert heads == [7.0] and isinstance(heads[0], float)


@pytest.mark.parametrize("title", ['""', "0", "null", "false", "-0"])
def test_falsy_title_produces_nothing_and_is_reported_as_skipped(title: str) -> None:
    assert roadmap(f'{{"title": {title}, "topics": [1]}}') == (
        [],
        [],
        REASON_NO_TITLE_TOPICS,
        False,
    )


@pytest.mark.parametrize("topics", ['""', "0", "null", "false"])
def test_falsy_topics_produce_nothing(topics: str) -> None:
    assert roadmap(f'{{"title": "T", "topics": {topics}}}')[0] == []


def test_diagram_style_roadmap_is_skipped_not_a_problem() -> None:
    assert roadmap('{"nodes": [], "edges": []}') == ([], [], REASON_NO_TITLE_TOPICS, False)


def test_empty_topics_array_still_gives_the_role_line() -> None:
    assert roadmap('{"title": "T", "description": 0, "topics": []}')[0] == [
        "Role: T - Description: "
    ]


def test_description_array_and_object_convert() -> None:
    assert roadmap('{"title": "T", "description": [], "topics": []}')[0] == [
        "Role: T - Description: "
    ]
    assert roadmap('{"title": "T", "description": {}, "topics": []}')[0] == [
        "Role: T - Description: [object Object]"
    ]


def test_null_topic_stops_the_file_and_is_reported() -> None:
    lines, _, reason, problem = roadmap(
        '{"title": "T", "topics": [{"label": "a", "type": "topic"}, null,'
        ' {"label": "b", "type": "topic"}]}'
    )
    assert lines == ["Role: T - Description: ", "Role: T - Topic: a"]
    assert (reason, problem) == (REASON_NULL_TOPIC, True)


def test_non_object_topic_entries_are_skipped_silently() -> None:
    lines, _, reason, _ = roadmap(
        '{"title": "T", "topics": [1, "s", true, [], [{"label": "x", "type": "topic"}],'
        ' {"label": "ok", "type": "topic"}]}'
    )
    assert lines == ["Role: T - Description: ", "Role: T - Topic: ok"] and reason is None


def test_string_topics_yield_only_the_role_line() -> None:
    assert roadmap('{"title": "T", "topics": "abc"}') == (
        ["Role: T - Description: "],
        ["T"],
        None,
        False,
    )


@pytest.mark.parametrize("topics", ["5", "true", '{"label": "x"}'])
def test_non_iterable_topics_keep_the_role_line_and_are_reported(topics: str) -> None:
    lines, _, reason, problem = roadmap(f'{{"title": "T", "topics": {topics}}}')
    assert lines == ["Role: T - Description: "]
    assert (reason, problem) == (REASON_NOT_ITERABLE, True)


@pytest.mark.parametrize("top", ["[]", "null", '"x"', "1", "true"])
def test_top_level_that_is_not_an_object_yields_nothing(top: str) -> None:
    assert roadmap(top)[0] == [] and roadmap(top)[2] == REASON_NOT_OBJECT


@pytest.mark.parametrize(
    "text",
    ["", " ", "\ufeff{}", '{"title": NaN}', '{"t": Infinity}', "{} x", "{,}", '{"a":1,}', "[1 2]"],
)
def test_invalid_json_is_reported(text: str) -> None:
    assert roadmap(text) == ([], [], REASON_INVALID_JSON, True)


def _nest(depth: int, inner: str = '"x"', opening: str = "[", closing: str = "]") -> str:
    return opening * depth + inner + closing * depth


def test_deep_nesting_alone_refuses_nothing() -> None:
    """JSON.parse has no depth limit: nesting nobody converts changes nothing."""
    deep = _nest(200_000)
    topic = '{"label": "a", "type": "topic"}'
    text = f'{{"title": "Deep", "extra": {deep}, "topics": [{deep}, {topic}]}}'
    outcome = chunk_roadmap(text, "r", "r/formatted-x.json", len(text))
    contents = [c.content for c in outcome.chunks]
    assert contents == ["Role: Deep - Description: ", "Role: Deep - Topic: a"]
    assert outcome.reason is None


@pytest.mark.parametrize("field", ["label", "level"])
def test_a_value_past_what_string_converts_stops_the_file_there(field: str) -> None:
    def text(depth: int) -> str:
        value = _nest(depth)
        entry = f'{{"label": {value}, "type": "topic"}}' if field == "label" else (
            f'{{"label": "b", "type": "topic", "level": {value}}}'
        )
        first = '{"label": "a", "type": "topic"}'
        return f'{{"title": "T", "topics": [{first}, {entry}, {first}]}}'

    limit = JS_STRING_MAX_ARRAY_DEPTH
    assert len(roadmap(text(limit))[0]) == 4 and roadmap(text(limit))[2] is None
    outcome = chunk_roadmap(text(limit + 1), "r", "r/formatted-x.json")
    assert [c.content for c in outcome.chunks] == ["Role: T - Description: ", "Role: T - Topic: a"]
    assert (outcome.reason, outcome.problem) == (REASON_TOO_DEEP, True)
    assert outcome.detail is not None and f"topics[1].{field} nests arrays" in outcome.detail
    assert "\n" not in outcome.detail and "2 statements kept" in outcome.detail


def test_a_title_past_what_json_stringify_writes_is_refused() -> None:
    def title(depth: int) -> str:  # objects all the way: String() stops at the first
        return _nest(depth, '"x"', '{"k": ', "}")

    limit = JS_STRINGIFY_MAX_DEPTH
    ok = chunk_roadmap(f'{{"title": {title(limit)}, "topics": []}}', "r", "r/formatted-x.json")
    assert [c.content for c in ok.chunks] == ["Role: [object Object] - Description: "]
    for depth in (limit + 1, 3 * limit):  # the second is past what the parser builds
        over = chunk_roadmap(f'{{"title": {title(depth)}, "topics": []}}', "r", "r/x.json")
        assert (over.chunks, over.reason, over.problem) == ([], REASON_TOO_DEEP, True)
        assert over.detail is not None and "title nests" in over.detail


def _deep_title_roadmap(depth: int, topics: int) -> str:
    title = "[" * depth + '"x"' + "]" * depth
    rows = ", ".join(f'{{"label": "t{i}", "type": "topic"}}' for i in range(topics))
    return f'{{"title": {title}, "topics": [{rows}]}}'


@pytest.mark.parametrize(
    "title",
    [
        '"Backend Developer"',
        "[[1, [2, null]], {\"b\": [], \"1\": \"\\u001b\\ud800\"}]",
        '"\\u00e9t\\u00e9 \\ud83d\\ude00 \\udfff \\u0007"',
        "1e400",
    ],
)
def test_roadmap_output_is_counted_exactly_before_it_is_built(title: str) -> None:
    text = (
        f'{{"title": {title}, "description": "d\\"q", "topics": ['
        '{"label": "HTML", "type": "topic", "level": "beginner"}, null]}'
    )
    where = ("ar\u00e9a", "ar\u00e9a/roadmaps/x.json")
    built = chunk_roadmap(text, *where).chunks
    size = len(serialize_store(built))
    # a bound of exactly what it produces lets it through; one byte less refuses it
    exact = chunk_roadmap(text, *where, 1, OutputBound(0, size))
    assert exact.chunks == built and exact.reason == REASON_NULL_TOPIC
    short = chunk_roadmap(text, *where, 1, OutputBound(0, size - 1))
    assert (short.chunks, short.reason) == ([], REASON_OUTPUT_TOO_LARGE)
    assert short.detail is not None and f"take {size:,} bytes" in short.detail


def test_a_deep_title_repeated_on_every_topic_is_refused_before_it_is_built() -> None:
    text = _deep_title_roadmap(60, 2000)
    outcome = chunk_roadmap(text, "r", "r/formatted-x.json", len(text.encode()))
    assert (outcome.chunks, outcome.reason, outcome.problem) == (
        [],
        REASON_OUTPUT_TOO_LARGE,
        True,
    )
    assert outcome.detail is not None and "knowledge-store.json" in outcome.detail
    # without the bound it would have written that much (the original's bytes)
    unbounded = chunk_roadmap(text, "r", "r/formatted-x.json").chunks
    assert len(serialize_store(unbounded)) > OUTPUT_BOUND.budget(len(text.encode()))


def test_object_with_own_tostring_stops_the_file() -> None:
    lines, _, reason, problem = roadmap(
        '{"title": "T", "topics": [{"label": "a", "type": "topic"},'
        ' {"label": {"toString": 1}, "type": "topic"}, {"label": "b", "type": "topic"}]}'
    )
    assert lines == ["Role: T - Description: ", "Role: T - Topic: a"]
    assert (reason, problem) == (REASON_CONVERSION, True)


def test_lone_surrogates_in_roadmaps_hash_as_replacement_character() -> None:
    outcome = chunk_roadmap('{"title": "T\\ud800", "topics": []}', "r", "r/formatted-x.json")
    [chunk] = outcome.chunks
    assert chunk.content == "Role: T\ud800 - Description: "
    expected = hashlib.sha256("Role: T\ufffd - Description: ".encode()).hexdigest()[:12]
    assert chunk.id == expected
