"""What the ingest refuses or flags as junk: binary files, huge files, huge paragraphs.

The original script chunked whatever ended in `.md`/`.txt`: an ELF binary renamed
`notes.md` became chunks of control bytes, and a 200 MB one-line file one 200 MB chunk
(several GB of memory on the way). These rules are deliberate deviations from it, so
junk is reported instead of published silently:

* a file larger than `max_file_bytes` is skipped before it is read (the size comes from
  the walk's stat, so a huge file never enters memory);
* a file whose first `SNIFF_BYTES` hold a NUL byte, or more than `BINARY_CONTROL_SHARE`
  control characters other than tab, LF, CR and FF, is skipped as binary (the test
  git and grep use, widened to catch binaries without NULs);
* a paragraph longer than `max_paragraph_chars` characters is kept (it may be a real,
  if badly formatted, text) and the file's manifest entry reports it;
* a file whose chunks would take more than `OUTPUT_PER_INPUT_BYTE` × its size +
  `OUTPUT_ALLOWANCE` bytes of knowledge-store.json is refused before they are built.
  The original copied a roadmap's `title` (nested 700 arrays deep, indented once more
  per level) into every topic's heading: 5 KB in, 100 MB out; an 800 KB file took all
  the memory of the host. What a file produces is bounded, not how deep it nests: a
  `level` nested 1,500 arrays deep writes a few bytes, as in the original (the limits
  JavaScript itself hits on deep values are in `chunking` and `jscompat`).

Pure functions on sizes, bytes and chunks: no I/O, no Dagster.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from brain_pipeline.corpus.store import Chunk

#: How much of a file's start is inspected for binary content.
SNIFF_BYTES = 8192
#: Above this share of control characters in the sniffed bytes, a file is binary.
BINARY_CONTROL_SHARE = 0.30

DEFAULT_MAX_FILE_BYTES = 10_000_000
DEFAULT_MAX_PARAGRAPH_CHARS = 20_000

REASON_BINARY = "binary file"
REASON_TOO_LARGE = "file too large"
REASON_LONG_PARAGRAPH = "paragraph too long"
REASON_TOO_DEEP = "JSON nested too deep"  # for JavaScript's own stack: see chunking
REASON_OUTPUT_TOO_LARGE = "chunks too large for the file"

#: The bound on what one file may add to knowledge-store.json: this many bytes per byte
#: of the file (ordinary files take 2 to 4; many short paragraphs under a long path and
#: heading reach about 15) ...
OUTPUT_PER_INPUT_BYTE = 32
#: ... plus this allowance, so a small file never trips it (256 KiB).
OUTPUT_ALLOWANCE = 262_144

# C0 controls and DEL, minus the four that plain text uses (tab, LF, FF, CR). Bytes
# 0x80-0x9F are not counted: in UTF-8 they are continuation bytes of ordinary text.
_CONTROL_BYTES = bytes([*(b for b in range(0x20) if b not in (0x09, 0x0A, 0x0C, 0x0D)), 0x7F])


@dataclass(frozen=True, slots=True)
class IngestLimits:
    """The junk thresholds (`corpus.max_file_bytes`, `corpus.max_paragraph_chars`)."""

    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES
    max_paragraph_chars: int = DEFAULT_MAX_PARAGRAPH_CHARS

    def __post_init__(self) -> None:
        if self.max_file_bytes < 1 or self.max_paragraph_chars < 1:
            raise ValueError(
                "ingest limits must be positive "
                f"(got max_file_bytes={self.max_file_bytes}, "
                f"max_paragraph_chars={self.max_paragraph_chars})"
            )

    @property
    def cache_variant(self) -> str:
        """A name for these limits in a cache key ("" for the defaults).

        The limits decide what a file contributes, so per-file caches must key on them;
        the defaults map to "" so caches built before the limits existed stay valid.
        """
        if self == DEFAULT_LIMITS:
            return ""
        return (
            f"max_file_bytes={self.max_file_bytes},"
            f"max_paragraph_chars={self.max_paragraph_chars}"
        )

    @classmethod
    def of_variant(cls, variant: str) -> IngestLimits:
        """The limits `cache_variant` names: what a cache row keyed by it was made with."""
        if not variant:
            return DEFAULT_LIMITS
        named = dict(part.split("=", 1) for part in variant.split(","))
        return cls(int(named["max_file_bytes"]), int(named["max_paragraph_chars"]))


DEFAULT_LIMITS = IngestLimits()


def too_large(size: int, limits: IngestLimits) -> str | None:
    """The detail of a "file too large" refusal, or None when `size` is within the limit."""
    if size <= limits.max_file_bytes:
        return None
    return f"{size:,} bytes, over the limit of {limits.max_file_bytes:,} (corpus.max_file_bytes)"


def binary_content(data: bytes) -> str | None:
    """Why `data` (a file's bytes, or its first SNIFF_BYTES) looks binary, or None.

    A NUL byte anywhere in the sniffed head is enough (no text format we read uses it;
    UTF-16 text has them too and would decode to junk as UTF-8). Otherwise more than
    BINARY_CONTROL_SHARE of the head in control characters other than tab, LF, CR, FF.
    """
    head = data[:SNIFF_BYTES]
    if not head:
        return None
    nul = head.find(b"\x00")
    if nul >= 0:
        return f"NUL byte at offset {nul}"
    controls = len(head) - len(head.translate(None, _CONTROL_BYTES))
    if controls > BINARY_CONTROL_SHARE * len(head):
        share = 100.0 * controls / len(head)
        return f"{share:.0f} % control characters in the first {len(head):,} bytes"
    return None


def long_paragraphs(chunks: Sequence[Chunk], limits: IngestLimits) -> str | None:
    """The detail reporting chunks over `max_paragraph_chars` characters, or None."""
    limit = limits.max_paragraph_chars
    over = [c for c in chunks if len(c.content) > limit]
    if not over:
        return None
    longest = max(over, key=lambda c: len(c.content))
    count = f"{len(over)} paragraphs" if len(over) > 1 else "1 paragraph"
    return (
        f"{count} over {limit:,} characters (corpus.max_paragraph_chars), kept; "
        f"longest {len(longest.content):,} characters, chunk {longest.id}"
    )


@dataclass(frozen=True, slots=True)
class OutputBound:
    """At most `per_input_byte` x the file's bytes + `allowance` bytes of store per file."""

    per_input_byte: int = OUTPUT_PER_INPUT_BYTE
    allowance: int = OUTPUT_ALLOWANCE

    def budget(self, input_bytes: int) -> int:
        """The most bytes of knowledge-store.json a file of `input_bytes` bytes may produce."""
        return self.per_input_byte * input_bytes + self.allowance

    def refusal(self, output_bytes: int, input_bytes: int) -> str | None:
        """The detail of a "chunks too large" refusal, or None when within the bound."""
        budget = self.budget(input_bytes)
        if output_bytes <= budget:
            return None
        return (
            f"its chunks would take {output_bytes:,} bytes of knowledge-store.json, over "
            f"the bound of {budget:,} ({self.per_input_byte} x its {input_bytes:,} bytes "
            f"+ {self.allowance:,}); nothing taken: shorten the title or heading its "
            "chunks repeat"
        )


OUTPUT_BOUND = OutputBound()
