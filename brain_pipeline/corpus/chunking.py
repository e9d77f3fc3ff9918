"""Turn one file's text into chunks: paragraphs of text files, statements of roadmaps.

Every rule here reproduces what the original Node.js script did (see the store
compatibility notes), because chunk ids are content hashes named by the evaluation
fixture: a different trim, split or heading choice changes the ids.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from brain_pipeline.corpus.jscompat import (
    JS_STRING_MAX_ARRAY_DEPTH,
    JS_STRINGIFY_MAX_DEPTH,
    JS_WHITESPACE,
    JS_WS_CLASS,
    JSError,
    JSONSyntaxError,
    JSRangeError,
    is_truthy,
    js_string,
    nesting_depth,
    parse_json,
    utf16_length,
)
from brain_pipeline.corpus.junk import (
    OUTPUT_BOUND,
    REASON_OUTPUT_TOO_LARGE,
    REASON_TOO_DEEP,
    OutputBound,
)
from brain_pipeline.corpus.store import (
    NO_HEADING,
    Chunk,
    chunk_id,
    heading_size,
    row_size,
    rows_store_size,
    string_size,
)
from brain_pipeline.utils.digest import new_sha256

#: Paragraph separator `/\n\s*\n/` with JavaScript's `\s`.
PARAGRAPH_SPLIT = re.compile(rf"\n[{JS_WS_CLASS}]*\n")

#: Headings follow the original regex `/^\s*#{1,6}\s+(.+?)\s*$/m` with JavaScript
#: semantics (`^`/`$` at any line terminator, `.` = anything but one); the tests hold that
#: regex, transcribed, as the specification `find_heading` is checked against.
_HEADING_FAST = re.compile(
    rf"(?m)^[{JS_WS_CLASS}]*#{{1,6}}[{JS_WS_CLASS}]+([^\n]*[^{JS_WS_CLASS}])[{JS_WS_CLASS}]*$"
)
_TERMINATORS_TO_NEWLINE = str.maketrans("\r\u2028\u2029", "\n\n\n")

#: Paragraphs must be longer than this, in UTF-16 code units, to be kept.
MIN_CHUNK_LENGTH = 20

ROADMAP_TOPIC_TYPES = frozenset({"topic", "subtopic", "title"})

# Roadmap outcomes worth reporting.
REASON_INVALID_JSON = "invalid JSON"
REASON_NOT_OBJECT = "roadmap top level is not an object"
REASON_NO_TITLE_TOPICS = "roadmap without title/topics"
REASON_NULL_TOPIC = "null topic entry"
REASON_NOT_ITERABLE = "roadmap topics are not iterable"
REASON_CONVERSION = "value cannot be converted to text"

#: How deep a roadmap is built when parsed; deeper containers are only checked (see
#: `parse_json`). The fields converted sit at most 4 levels down (object, topics, entry,
#: label), so a value deeper than this can only be reached through a chain String() or
#: JSON.stringify overflows on first: whatever it holds never reaches the store.
ROADMAP_BUILD_DEPTH = 2 * max(JS_STRING_MAX_ARRAY_DEPTH, JS_STRINGIFY_MAX_DEPTH)


def decode_text(data: bytes) -> str:
    """UTF-8 with one U+FFFD per maximal ill-formed subsequence (as Node's decoder); BOM kept."""
    return data.decode("utf-8", "replace")


def find_heading(content: str) -> str | None:
    """The trimmed capture of the heading regex's first match in a *trimmed* paragraph, or None.

    Equivalent to that regex there, about 20 times faster: mapping every line terminator
    to a newline (one for one, so positions hold) gives Python's `^`, `$` and `[^\\n]`
    the JavaScript meaning, and the lazy `(.+?)\\s*$` becomes "up to the last non-space
    of the line". That rewrite is exact because in a trimmed paragraph the greedy `\\s+`
    after the hashes always stops on a non-space character, so the lazy capture can
    never be made of spaces alone (it could at the very end of an untrimmed string).
    """
    if "#" not in content:
        return None
    probe = content
    if "\r" in content or (not content.isascii() and ("\u2028" in content or "\u2029" in content)):
        probe = content.translate(_TERMINATORS_TO_NEWLINE)
    match = _HEADING_FAST.search(probe)
    if match is None:
        return None
    return content[match.start(1) : match.end(1)].strip(JS_WHITESPACE)


def chunk_text(text: str, area: str, source: str) -> list[Chunk]:
    """Paragraph chunks of a text file, each carrying the latest heading seen before it.

    `text` is what `decode_text` returns, so it holds no lone surrogates. The heading
    regex is matched on the trimmed paragraph, and a match counts even in a paragraph
    too short to keep (a lone `# Title` line sets the heading of what follows).
    """
    chunks: list[Chunk] = []
    append = chunks.append
    heading: Any = NO_HEADING
    whitespace = JS_WHITESPACE
    sha256 = new_sha256
    for paragraph in PARAGRAPH_SPLIT.split(text):
        content = paragraph.strip(whitespace)
        if "#" in content:
            found = find_heading(content)
            if found is not None:
                heading = found
        size = len(content)
        if size > MIN_CHUNK_LENGTH or (
            size > MIN_CHUNK_LENGTH // 2 and utf16_length(content) > MIN_CHUNK_LENGTH
        ):
            # chunk_id inlined: decoded file text never holds lone surrogates
            key = sha256(content.encode("utf-8")).hexdigest()[:12]
            append(Chunk(key, content, area, source, heading))
    return chunks


@dataclass
class RoadmapOutcome:
    """The chunks of one roadmap file and, when it is worth telling, why it stopped."""

    chunks: list[Chunk] = field(default_factory=list)
    reason: str | None = None  # None when the file was read to the end
    detail: str | None = None
    problem: bool = False  # True: malformed; False with a reason: nothing to take

    def fail(self, reason: str, detail: str | None = None, *, problem: bool = True) -> None:
        self.reason, self.detail, self.problem = reason, detail, problem


def _roadmap_tails(data: dict[str, Any], outcome: RoadmapOutcome) -> tuple[str, list[str]]:
    """The title's text and what follows it on each statement, stopping where JavaScript
    would have thrown. A statement is `"Role: " + title + tail`; kept apart so the cost
    of repeating the title can be counted before any statement is built."""
    tails: list[str] = []
    title = data.get("title")
    topics = data.get("topics")
    if not (is_truthy(title) and is_truthy(topics)):
        outcome.fail(REASON_NO_TITLE_TOPICS, problem=False)
        return "", tails
    where = "title"  # what is being converted, for the report
    try:
        title_text = js_string(title)
    except JSError as exc:
        _conversion_failed(outcome, exc, where, tails)
        return "", tails
    try:
        where = "description"
        description = data.get("description")
        description_text = js_string(description) if is_truthy(description) else ""
        tails.append(f" - Description: {description_text}")
        if isinstance(topics, str):
            return title_text, tails  # iterating a string yields characters, none has a label
        if not isinstance(topics, list):
            outcome.fail(REASON_NOT_ITERABLE, f"topics is {type(topics).__name__}")
            return title_text, tails
        for index, topic in enumerate(topics):
            if topic is None:
                outcome.fail(REASON_NULL_TOPIC, f"topics[{index}] is null; later entries lost")
                return title_text, tails
            if not isinstance(topic, dict):
                continue  # numbers, strings, booleans, arrays have no `label`
            label = topic.get("label")
            kind = topic.get("type")
            if not (is_truthy(label) and isinstance(kind, str) and kind in ROADMAP_TOPIC_TYPES):
                continue
            where = f"topics[{index}].label"
            tail = f" - Topic: {js_string(label)}"
            level = topic.get("level")
            if is_truthy(level):
                where = f"topics[{index}].level"
                tail += f" ({js_string(level)})"
            tails.append(tail)
    except JSError as exc:
        _conversion_failed(outcome, exc, where, tails)
    return title_text, tails


def _conversion_failed(
    outcome: RoadmapOutcome, exc: JSError, where: str, tails: list[str]
) -> None:
    """Report where JavaScript would have thrown: the original stopped the file there and
    kept the statements already made. A stack overflow (a value nested thousands deep)
    is told apart from a type error, naming the field and the limit."""
    if isinstance(exc, JSRangeError):
        outcome.fail(
            REASON_TOO_DEEP,
            f"{where} nests arrays more than {JS_STRING_MAX_ARRAY_DEPTH:,} deep: "
            "JavaScript's String() overflows its call stack there (RangeError), so the "
            f"original stopped the file; {_kept(tails)}",
        )
    else:
        outcome.fail(REASON_CONVERSION, f"{where}: {exc}")


def _kept(tails: list[str]) -> str:
    if not tails:
        return "nothing taken"
    return f"{len(tails)} statement{'s' if len(tails) > 1 else ''} kept, later entries lost"


_ROLE = "Role: "


def _roadmap_store_size(
    title: Any, title_text: str, tails: list[str], area: str, source: str
) -> int:
    """Bytes the statements would take in knowledge-store.json, counted from their parts:
    the title's text and its heading are measured once, not once per topic."""
    shared = string_size(area) + string_size(source) + heading_size(title)
    prefix = len(_ROLE) + string_size(title_text) - 2  # "Role: " + title, inside the quotes
    rows = sum(row_size(prefix + string_size(tail), 0, 0, shared) for tail in tails)
    return rows_store_size(rows, len(tails))


def chunk_roadmap(
    text: str,
    area: str,
    source: str,
    input_bytes: int | None = None,
    bound: OutputBound = OUTPUT_BOUND,
) -> RoadmapOutcome:
    """One chunk per roadmap statement: the role line, then each labelled topic.

    No length floor applies and the heading is the raw `title` value, whatever its type.
    Nesting depth alone refuses nothing (JSON.parse has no limit): a value nested past
    what JavaScript's String() can convert stops the file where the original stopped,
    and a title nested past what JSON.stringify can write is refused (the original
    wrote no store at all). With `input_bytes` (the file's size) the file is also
    refused, before its chunks exist, when they would break `bound`: the title is
    repeated in every statement and every heading, so the output can grow far faster
    than the file.
    """
    outcome = RoadmapOutcome()
    try:
        data = parse_json(text, ROADMAP_BUILD_DEPTH)
    except JSONSyntaxError as exc:
        outcome.fail(REASON_INVALID_JSON, str(exc))
        return outcome
    if not isinstance(data, dict):
        # The original skipped it without a word; a roadmap that is an array (or a bare
        # value) is a malformed roadmap, so it is reported as a problem (deliberate).
        detail = f"top level is {_js_type(data)}, nothing taken"
        outcome.fail(REASON_NOT_OBJECT, detail)
        return outcome
    title = data.get("title")
    title_text, tails = _roadmap_tails(data, outcome)
    if (
        tails
        and isinstance(title, list | dict)
        and nesting_depth(title) > JS_STRINGIFY_MAX_DEPTH
    ):
        outcome.fail(
            REASON_TOO_DEEP,
            f"title nests arrays/objects more than {JS_STRINGIFY_MAX_DEPTH:,} deep: "
            "JavaScript's JSON.stringify overflows its call stack there, so the "
            "original could not write its store at all; nothing taken",
        )
        return outcome
    if input_bytes is not None and tails:
        size = _roadmap_store_size(title, title_text, tails, area, source)
        excess = bound.refusal(size, input_bytes)
        if excess is not None:
            outcome.fail(REASON_OUTPUT_TOO_LARGE, excess)
            return outcome
    outcome.chunks = [
        Chunk(chunk_id(line), line, area, source, title)
        for line in (_ROLE + title_text + tail for tail in tails)
    ]
    return outcome


def _js_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array"
