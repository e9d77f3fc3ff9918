"""Printing any text the store can hold: what the output cannot encode becomes an escape.

A roadmap title can hold a lone surrogate (`"\\ud800"` in its JSON), which the store
keeps and which no UTF-8 (or narrower) terminal can print: Python's default then raises
UnicodeEncodeError mid-output. Each such character is written instead as `\\uXXXX`
(astral characters as their two UTF-16 escapes), which is what a person can read and,
inside a JSON string, what JSON itself means by it: `--json` output stays valid JSON
that decodes to the very string the store holds.
"""

from __future__ import annotations

import codecs
from typing import Any, TextIO

ERRORS = "brain_pipeline.escape"


def _escape(error: UnicodeError) -> tuple[str, int]:
    if not isinstance(error, UnicodeEncodeError):
        raise error
    escapes = []
    for char in error.object[error.start : error.end]:
        code = ord(char)
        if code > 0xFFFF:
            code -= 0x10000
            escapes.append(f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}")
        else:
            escapes.append(f"\\u{code:04x}")
    return "".join(escapes), error.end


codecs.register_error(ERRORS, _escape)


def escape_unencodable(*streams: TextIO | Any) -> None:
    """Make `streams` (sys.stdout, sys.stderr) write unencodable characters as escapes."""
    for stream in streams:
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors=ERRORS)
