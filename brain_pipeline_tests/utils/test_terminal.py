"""utils.terminal: what an output stream cannot encode, and control characters, are
written as JSON-style escapes."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from brain_pipeline.utils.terminal import (
    escape_controls,
    printable,
    unescaped,
)


def _stream(encoding: str) -> tuple[io.BytesIO, io.TextIOWrapper]:
    raw = io.BytesIO()
    return raw, io.TextIOWrapper(raw, encoding=encoding, write_through=True)


def test_a_lone_surrogate_is_written_as_its_escape_on_utf8() -> None:
    raw, stream = _stream("utf-8")
    escape_controls(stream)
    stream.write("a\ud800b é")
    assert raw.getvalue().decode("utf-8") == "a\\ud800b é"


def test_an_ascii_stream_escapes_astral_characters_as_two_utf16_units() -> None:
    raw, stream = _stream("ascii")
    escape_controls(stream)
    stream.write("x\U0001f600é")
    assert raw.getvalue() == b"x\\ud83d\\ude00\\u00e9"


def test_json_written_through_it_decodes_to_the_same_string() -> None:
    text = "title \ud800 \U0001f600 caf\u00e9"
    raw, stream = _stream("ascii")
    escape_controls(stream)
    stream.write(json.dumps({"t": text}, ensure_ascii=False))
    assert json.loads(raw.getvalue().decode("ascii"))["t"] == text


def test_without_it_the_stream_raises() -> None:
    _, stream = _stream("utf-8")
    with pytest.raises(UnicodeEncodeError):
        stream.write("\ud800")


def test_objects_without_reconfigure_are_left_alone() -> None:
    escape_controls(object())  # a captured stream of a test runner, say


HOSTILE = "Title\x1b]0;owned\x07 then\x1b[2K\rforged line\x9b31m \x7f\ud800 tab\tnewline\n"


def test_control_characters_are_written_as_escapes_but_tab_and_newline() -> None:
    raw, stream = _stream("utf-8")
    escape_controls(stream)
    stream.write(HOSTILE + "caf\u00e9")
    written = raw.getvalue().decode("utf-8")
    assert written == (
        "Title\\u001b]0;owned\\u0007 then\\u001b[2K\\u000dforged line\\u009b31m \\u007f"
        "\\ud800 tab\tnewline\ncaf\u00e9"
    )
    assert printable(HOSTILE) == written.removesuffix("caf\u00e9").replace("\\ud800", "\ud800")


def test_escaping_twice_is_escaping_once_and_json_stays_json() -> None:
    raw, stream = _stream("ascii")
    escape_controls(stream)
    escape_controls(stream)
    stream.write(json.dumps({"t": HOSTILE}, ensure_ascii=False) + "\x1b")
    text = raw.getvalue().decode("ascii")
    assert "\x1b" not in text and "\\\\u001b" not in text.removesuffix("\\u001b")
    assert json.loads(text.removesuffix("\\u001b"))["t"] == HOSTILE


def test_a_bar_gets_the_same_file_without_the_escaping(tmp_path: Path) -> None:
    with (tmp_path / "tty").open("w", encoding="utf-8") as stream:
        escape_controls(stream)
        stream.write("a\x1b")
        with unescaped(stream) as raw:
            raw.write("[bar\x1b[0m]")
        stream.write("b\x1b\n")
    assert (tmp_path / "tty").read_text() == "a\\u001b[bar\x1b[0m]b\\u001b\n"
