"""utils.terminal: what an output stream cannot encode is written as a JSON-style escape."""

from __future__ import annotations

import io
import json

import pytest

from brain_pipeline.utils.terminal import escape_unencodable


def _stream(encoding: str) -> tuple[io.BytesIO, io.TextIOWrapper]:
    raw = io.BytesIO()
    return raw, io.TextIOWrapper(raw, encoding=encoding, write_through=True)


def test_a_lone_surrogate_is_written_as_its_escape_on_utf8() -> None:
    raw, stream = _stream("utf-8")
    escape_unencodable(stream)
    stream.write("a\ud800b é")
    assert raw.getvalue().decode("utf-8") == "a\\ud800b é"


def test_an_ascii_stream_escapes_astral_characters_as_two_utf16_units() -> None:
    raw, stream = _stream("ascii")
    escape_unencodable(stream)
    stream.write("x\U0001f600é")
    assert raw.getvalue() == b"x\\ud83d\\ude00\\u00e9"


def test_json_written_through_it_decodes_to_the_same_string() -> None:
    text = "title \ud800 \U0001f600 caf\u00e9"
    raw, stream = _stream("ascii")
    escape_unencodable(stream)
    stream.write(json.dumps({"t": text}, ensure_ascii=False))
    assert json.loads(raw.getvalue().decode("ascii"))["t"] == text


def test_without_it_the_stream_raises() -> None:
    _, stream = _stream("utf-8")
    with pytest.raises(UnicodeEncodeError):
        stream.write("\ud800")


def test_objects_without_reconfigure_are_left_alone() -> None:
    escape_unencodable(object())  # a captured stream of a test runner, say
