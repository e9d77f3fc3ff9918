"""Text from the corpus or the fixture inside the Markdown that the Dagster UI renders.

Check and asset metadata written as Markdown is rendered by the UI: a heading, query or
area name holding `![x](http://host/p.png)` would load an image from that host when the
page is opened, `[click](http://...)` would be a link that looks like ours, `|` would
break a table and a newline end it. Text that is not ours goes through `md_text`: each
character that can open inline markup (links, images, emphasis, code, HTML, entities,
table cells, a heading) gets a backslash, which CommonMark renders literally; the `:` of
`://`, the `.` of `www.` and every `@` too, so no autolink forms; line breaks become
spaces, and control characters are written as `\\uXXXX`.
"""

from __future__ import annotations

import re

from brain_pipeline.utils.terminal import printable

#: What opens any inline markup, for text shown literally (tables, lists).
_MARKUP = re.compile(r"[\\`*_{}\[\]()#!<>&|~@]|:(?=//)|(?<=\bwww)\.", re.IGNORECASE)
#: What turns prose into a link, an image, a tag, an entity or an autolink.
_ACTIVE = re.compile(r"[\\\[\]<>&@]|:(?=//)|(?<=\bwww)\.", re.IGNORECASE)
_LINE_BREAKS = re.compile("\r\n|[\n\r\u2028\u2029\u0085]")


def md_text(text: object) -> str:
    """`text` as literal Markdown inline text, safe in a paragraph, a list or a table cell."""
    flat = _LINE_BREAKS.sub(" ", str(text))
    return _MARKUP.sub(lambda m: "\\" + m.group(), printable(flat))


def md_defanged(text: str) -> str:
    """`text` (our sentence with corpus or fixture text inside) rendered without any link,
    image, HTML tag, entity or autolink, and otherwise as it reads.

    For check descriptions, which the UI renders as Markdown and the command line prints
    as they are: only the characters that open something active get a backslash, so
    ordinary punctuation (parentheses, colons, backticks) stays readable on a terminal.
    """
    return _ACTIVE.sub(lambda m: "\\" + m.group(), text)


_DEFANGED = re.compile(r"\\([\\\[\]<>&@:.])")


def md_undefanged(text: str) -> str:
    """`md_defanged`'s inverse: a check description as a person reads it, for the
    terminal and the notification (plain text), where a backslash would only be noise."""
    return _DEFANGED.sub(lambda m: m.group(1), text)


def md_code(text: object, *, in_table: bool = False) -> str:
    """`text` as an inline code span; `in_table` for a table cell, where GFM splits cells
    on `|` even inside a code span unless it is escaped (and then shows it unescaped).

    A code span shows its content literally, so nothing is escaped but line breaks and
    control characters; the fence is one backtick longer than the longest run inside, so
    the text cannot close it.
    """
    flat = printable(_LINE_BREAKS.sub(" ", str(text)))
    longest = max((len(run) for run in re.findall("`+", flat)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") else ""
    span = f"{fence}{pad}{flat}{pad}{fence}"
    return span.replace("|", "\\|") if in_table else span
