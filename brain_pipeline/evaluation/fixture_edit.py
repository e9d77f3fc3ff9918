"""Edit the hand-written fixture file as text, keeping its layout.

The fixture is written and read by people (and by the agent's own eval script), with
notes, line breaks and key order chosen by hand. Re-dumping the parsed JSON would
reformat all of it, so every edit here is a splice into the original text at positions
found by a small position-recording JSON reader; the result is re-validated by
`parse_fixture` before anything is written.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass, field
from json.decoder import scanstring  # type: ignore[attr-defined]
from pathlib import Path
from typing import Any

from brain_pipeline.evaluation.fixture import Fixture, parse_fixture
from brain_pipeline.utils.atomic import atomic_write_bytes

_WS = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?")
_LITERALS = {"true": True, "false": False, "null": None}


class FixtureEditError(ValueError):
    """The fixture text cannot be edited as asked; nothing was written."""


@dataclass
class Node:
    """A JSON value and where it sits in the text: `text[start:end]`."""

    kind: str
    """"object", "array", "string" or "scalar"."""
    start: int
    end: int
    value: Any = None
    """The decoded value for strings and scalars."""
    items: list[Node] = field(default_factory=list)
    members: list[tuple[str, Node]] = field(default_factory=list)
    key_starts: list[int] = field(default_factory=list)

    def member(self, key: str) -> Node | None:
        """The value of the first member named `key` (objects only)."""
        return next((node for name, node in self.members if name == key), None)


def _skip(text: str, pos: int) -> int:
    match = _WS.match(text, pos)
    return match.end() if match else pos


def _parse_value(text: str, pos: int) -> Node:
    pos = _skip(text, pos)
    if pos >= len(text):
        raise FixtureEditError("unexpected end of the fixture text")
    char = text[pos]
    if char == "{":
        return _parse_object(text, pos)
    if char == "[":
        return _parse_array(text, pos)
    if char == '"':
        value, end = scanstring(text, pos + 1)
        return Node("string", pos, end, value=value)
    number = _NUMBER.match(text, pos)
    if number:
        return Node("scalar", pos, number.end(), value=json.loads(number.group()))
    for word, value in _LITERALS.items():
        if text.startswith(word, pos):
            return Node("scalar", pos, pos + len(word), value=value)
    raise FixtureEditError(f"cannot read the fixture text at offset {pos}")


def _parse_object(text: str, pos: int) -> Node:
    node = Node("object", pos, pos)
    pos = _skip(text, pos + 1)
    if text.startswith("}", pos):
        node.end = pos + 1
        return node
    while True:
        pos = _skip(text, pos)
        if not text.startswith('"', pos):
            raise FixtureEditError(f"expected a key at offset {pos}")
        key_start = pos
        key, pos = scanstring(text, pos + 1)
        pos = _skip(text, pos)
        if not text.startswith(":", pos):
            raise FixtureEditError(f"expected ':' at offset {pos}")
        value = _parse_value(text, pos + 1)
        node.members.append((key, value))
        node.key_starts.append(key_start)
        pos = _skip(text, value.end)
        if text.startswith(",", pos):
            pos += 1
            continue
        if text.startswith("}", pos):
            node.end = pos + 1
            return node
        raise FixtureEditError(f"expected ',' or '}}' at offset {pos}")


def _parse_array(text: str, pos: int) -> Node:
    node = Node("array", pos, pos)
    pos = _skip(text, pos + 1)
    if text.startswith("]", pos):
        node.end = pos + 1
        return node
    while True:
        item = _parse_value(text, pos)
        node.items.append(item)
        pos = _skip(text, item.end)
        if text.startswith(",", pos):
            pos += 1
            continue
        if text.startswith("]", pos):
            node.end = pos + 1
            return node
        raise FixtureEditError(f"expected ',' or ']' at offset {pos}")


def parse_positions(text: str) -> Node:
    """The top-level JSON value of `text` with the position of every value."""
    node = _parse_value(text, 0)
    if _skip(text, node.end) != len(text):
        raise FixtureEditError("trailing text after the fixture's JSON value")
    return node


def _line_indent(text: str, pos: int) -> str:
    """The leading whitespace of the line holding `pos`."""
    line_start = text.rfind("\n", 0, pos) + 1
    match = _WS.match(text, line_start)
    indent = match.group() if match else ""
    return indent.replace("\n", "").replace("\r", "")


def _quote(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def _render_like(value: Any, sibling: Node, text: str) -> str:
    """`value` as JSON in the style of an existing sibling (multi-line or compact)."""
    sample = text[sibling.start : sibling.end]
    if sibling.kind not in ("object", "array") or "\n" not in sample:
        return json.dumps(value, ensure_ascii=False)
    own = _line_indent(text, sibling.start)
    inner = own + "  "
    if sibling.kind == "object" and sibling.key_starts:
        inner = _line_indent(text, sibling.key_starts[0])
    elif sibling.kind == "array" and sibling.items:
        inner = _line_indent(text, sibling.items[0].start)
    unit = max(len(inner) - len(own), 1)
    rendered = json.dumps(value, ensure_ascii=False, indent=unit)
    return rendered.replace("\n", "\n" + own)


def append_to_array(text: str, array: Node, rendered: list[str]) -> str:
    """Insert already-rendered items at the end of `array`, following its line style."""
    if array.kind != "array":
        raise FixtureEditError("expected an array")
    if not rendered:
        return text
    if not array.items:
        return text[: array.start + 1] + ", ".join(rendered) + text[array.end - 1 :]
    first, last = array.items[0], array.items[-1]
    between = text[array.start + 1 : first.start]
    if "\n" in between:
        indent = _line_indent(text, first.start)
        addition = "".join(f",\n{indent}{item}" for item in rendered)
    else:
        addition = "".join(f", {item}" for item in rendered)
    return text[: last.end] + addition + text[last.end :]


def add_comment(text: str, line: str) -> str:
    """Append `line` to the top-level `$comment` array (created, minimally, if absent)."""
    root = parse_positions(text)
    if root.kind != "object":
        raise FixtureEditError("the fixture's top level is not an object")
    comment = root.member("$comment")
    if comment is not None and comment.kind == "array":
        return append_to_array(text, comment, [_quote(line)])
    if comment is not None and comment.kind == "string":
        merged = f"[{_quote(comment.value)}, {_quote(line)}]"
        return text[: comment.start] + merged + text[comment.end :]
    if comment is not None:
        raise FixtureEditError("the fixture's $comment is neither a list nor a string")
    member = f'"$comment": [{_quote(line)}]'
    if not root.key_starts:
        return text[: root.start + 1] + member + text[root.start + 1 :]
    first_key = root.key_starts[0]
    between = text[root.start + 1 : first_key]
    separator = ",\n" + _line_indent(text, first_key) if "\n" in between else ", "
    return text[:first_key] + member + separator + text[first_key:]


def replace_ids(text: str, remaps: dict[str, str]) -> tuple[str, dict[str, int]]:
    """Replace old ids by new ones inside every query's `relevant` list, nowhere else.

    Returns the new text and how many labels each old id had. Only the string tokens of
    `relevant` lists are spliced, so notes and comments that mention an id stay as written.
    """
    root = parse_positions(text)
    queries = root.member("queries") if root.kind == "object" else None
    counts = dict.fromkeys(remaps, 0)
    spans: list[tuple[int, int, str]] = []
    for item in queries.items if queries is not None and queries.kind == "array" else []:
        relevant = item.member("relevant") if item.kind == "object" else None
        if relevant is None or relevant.kind != "array":
            continue
        for label in relevant.items:
            if label.kind == "string" and label.value in remaps:
                counts[label.value] += 1
                spans.append((label.start, label.end, _quote(remaps[label.value])))
    for start, end, replacement in sorted(spans, reverse=True):
        text = text[:start] + replacement + text[end:]
    return text, counts


def add_query(text: str, query: str, area: str, ids: list[str]) -> tuple[str, str]:
    """Add `ids` to the query (query, area), or append a new query; (new text, what happened).

    Ids already labelled for that query are skipped.
    """
    root = parse_positions(text)
    queries = root.member("queries") if root.kind == "object" else None
    if queries is None or queries.kind != "array":
        raise FixtureEditError("the fixture has no 'queries' list")
    for item in queries.items:
        if item.kind != "object":
            continue
        q, a = item.member("query"), item.member("area")
        if q is None or a is None or q.value != query or a.value != area:
            continue
        relevant = item.member("relevant")
        if relevant is None or relevant.kind != "array":
            raise FixtureEditError(f"query {query!r} has no 'relevant' list")
        known = {r.value for r in relevant.items}
        fresh = [i for i in dict.fromkeys(ids) if i not in known]
        if not fresh:
            return text, "already labelled: nothing to add"
        edited = append_to_array(text, relevant, [_quote(i) for i in fresh])
        return edited, f"extended the existing query with {len(fresh)} id(s)"
    value = {"query": query, "area": area, "relevant": list(dict.fromkeys(ids))}
    sibling = queries.items[-1] if queries.items else queries
    rendered = _render_like(value, sibling, text)
    return append_to_array(text, queries, [rendered]), "appended a new query"


def new_fixture_text(query: str, area: str, ids: list[str], comment: str) -> str:
    """A new fixture holding one query, laid out one key per line so hand edits and later
    `fixture label --add` appends stay readable."""
    document = {
        "$comment": [comment],
        "queries": [{"query": query, "area": area, "relevant": list(dict.fromkeys(ids))}],
    }
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def _remove_item(text: str, array: Node, index: int) -> str:
    """`text` without `array.items[index]` and the separator that joined it."""
    items = array.items
    if len(items) == 1:
        return text[: array.start + 1] + text[array.end - 1 :]
    if index == 0:
        return text[: items[0].start] + text[items[1].start :]
    return text[: items[index - 1].end] + text[items[index].end :]


def _find_query(root: Node, query: str, area: str) -> tuple[Node, int] | None:
    """The `queries` array and the index of the query asked as `query` in `area`."""
    queries = root.member("queries") if root.kind == "object" else None
    if queries is None or queries.kind != "array":
        raise FixtureEditError("the fixture has no 'queries' list")
    for index, item in enumerate(queries.items):
        if item.kind != "object":
            continue
        q, a = item.member("query"), item.member("area")
        if q is not None and a is not None and q.value == query and a.value == area:
            return queries, index
    return None


def remove_ids(text: str, query: str, area: str, ids: list[str]) -> tuple[str, str]:
    """Remove `ids` from the `relevant` of (query, area); (new text, what happened).

    A query left with no id is removed (a query must name at least one answer). Ids the
    query does not list are an error, so a typo cannot look like a removal.
    """
    found = _find_query(parse_positions(text), query, area)
    if found is None:
        raise FixtureEditError(f"no query {query!r} in area {area!r} in the fixture")
    queries, index = found
    relevant = queries.items[index].member("relevant")
    if relevant is None or relevant.kind != "array":
        raise FixtureEditError(f"query {query!r} has no 'relevant' list")
    listed = [r.value for r in relevant.items]
    missing = [i for i in ids if i not in listed]
    if missing:
        raise FixtureEditError(f"query {query!r} ({area}) does not list {', '.join(missing)}")
    if set(listed) <= set(ids):
        return _remove_item(text, queries, index), "removed the query (no id left)"
    for key in dict.fromkeys(ids):
        root = parse_positions(text)
        located = _find_query(root, query, area)
        assert located is not None
        array = located[0].items[located[1]].member("relevant")
        assert array is not None
        position = next(i for i, r in enumerate(array.items) if r.value == key)
        text = _remove_item(text, array, position)
    return text, f"removed {len(set(ids))} id(s) from the query"


def set_query_areas(text: str, moves: dict[tuple[str, str], str]) -> tuple[str, int]:
    """Set the `area` of each query (query, old area) in `moves` to its new area.

    Returns the new text and how many queries changed; only the area strings are spliced.
    """
    root = parse_positions(text)
    queries = root.member("queries") if root.kind == "object" else None
    spans: list[tuple[int, int, str]] = []
    for item in queries.items if queries is not None and queries.kind == "array" else []:
        if item.kind != "object":
            continue
        q, a = item.member("query"), item.member("area")
        if q is None or a is None:
            continue
        target = moves.get((q.value, a.value))
        if target is not None:
            spans.append((a.start, a.end, _quote(target)))
    for start, end, replacement in sorted(spans, reverse=True):
        text = text[:start] + replacement + text[end:]
    return text, len(spans)


def create_fixture_file(path: Path, text: str) -> Fixture:
    """Write a new fixture at `path` (validated, atomically); refuses to replace a file."""
    fixture = parse_fixture(text.encode("utf-8"), source=str(path))
    if path.exists():
        raise FixtureEditError(f"{path} appeared while it was being created; run again")
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, text.encode("utf-8"))
    return fixture


def write_fixture_text(path: Path, original: bytes, text: str) -> tuple[Fixture, Path]:
    """Validate `text`, keep `<path>.bak` with the original bytes, replace `path` atomically.

    Refuses (FixtureEditError) when the file changed since `original` was read, or when
    the edited text is not a valid fixture; the file is then left as it was.
    """
    # Empty is allowed: removing the last label leaves a fixture to label again.
    fixture = parse_fixture(text.encode("utf-8"), source=str(path), allow_empty=True)
    current = path.read_bytes()
    if current != original:
        raise FixtureEditError(f"{path} changed while it was being edited; run again")
    backup = path.with_name(path.name + ".bak")
    atomic_write_bytes(backup, original)
    shutil.copymode(path, backup)
    atomic_write_bytes(path, text.encode("utf-8"))
    return fixture, backup
