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
import re
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


# --- control characters -------------------------------------------------------------------
#
# Corpus text reaches the terminal in `search`, `fixture show` and the run's log lines. A
# terminal obeys the control characters in it: `ESC ]0;...BEL` retitles the window,
# `ESC [2K` + CR erases the line and forges another. Every C0 control but tab and newline,
# DEL and the C1 controls (U+0080-U+009F; U+009B is a one-character CSI) are printed as
# `\uXXXX` instead. Done in the stream's codec, so every print of every command is
# covered without each call site having to remember it.

_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_SUFFIX = "-printable"
_LOOKUP_SUFFIX = "_printable"  # what the codec registry hands a search function


def printable(text: str) -> str:
    """`text` with its control characters (but tab and newline) written as `\\uXXXX`."""
    if not _CONTROLS.search(text):
        return text
    return _CONTROLS.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _printable_codec(name: str) -> codecs.CodecInfo | None:
    """The codec `<base>-printable`: `base`, with control characters escaped first."""
    if not name.endswith(_LOOKUP_SUFFIX):
        return None
    try:
        base = codecs.lookup(name[: -len(_LOOKUP_SUFFIX)])
    except LookupError:
        return None

    class Encoder(codecs.IncrementalEncoder):
        def __init__(self, errors: str = "strict") -> None:
            super().__init__(errors)
            self._base = base.incrementalencoder(errors)

        def encode(self, input: str, final: bool = False) -> bytes:  # noqa: A002
            return bytes(self._base.encode(printable(input), final))

        def reset(self) -> None:
            self._base.reset()

    def encode(text: str, errors: str = "strict") -> tuple[bytes, int]:
        return base.encode(printable(text), errors)[0], len(text)

    return codecs.CodecInfo(
        encode,
        base.decode,
        incrementalencoder=Encoder,
        incrementaldecoder=base.incrementaldecoder,
        name=f"{base.name}{_SUFFIX}",
    )


codecs.register(_printable_codec)


def escape_controls(*streams: TextIO | Any) -> None:
    """Make `streams` print control characters as escapes (and unencodable ones too).

    Text written to the stream after this passes through `printable` on its way out;
    a progress bar that must send real escape sequences writes to `unescaped(stream)`.
    """
    for stream in streams:
        reconfigure = getattr(stream, "reconfigure", None)
        encoding = getattr(stream, "encoding", None)
        if reconfigure is None or not isinstance(encoding, str):
            continue
        if encoding.endswith(_SUFFIX):
            reconfigure(errors=ERRORS)
            continue
        reconfigure(encoding=codecs.lookup(encoding).name + _SUFFIX, errors=ERRORS)


def unescaped(stream: TextIO) -> TextIO:
    """A text stream on the same file as `stream`, without the control escaping.

    For a terminal library that writes its own escape sequences (the progress bar);
    what it prints of other text must be passed through `printable` by the caller.
    """
    stream.flush()
    encoding = getattr(stream, "encoding", "utf-8").removesuffix(_SUFFIX)
    return open(  # noqa: SIM115 (the caller's context closes it)
        stream.fileno(), "w", encoding=encoding, errors=ERRORS, closefd=False, buffering=1
    )
