"""Corpora for the differential tests: every edge case of the contract, and random ones."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

SAME = "This exact paragraph appears in several files and areas."

TEXT_FILES: dict[str, bytes | str] = {
    # over the output bound: a 20,000-character heading over 2,000 short paragraphs
    "long-heading.md": "# " + "h" * 20_000 + "".join(
        f"\n\nparagraph {i:05} is kept." for i in range(2_000)
    ),
    "basic.md": "# Heading One\n\nA paragraph that is long enough to keep.\n\nshort\n",
    "whitespace.md": (
        "Paragraph one is long enough here.\n\u00a0\n\tParagraph two is long enough too.\n"
        " \u3000 \n\ufeffParagraph three starts with FEFF.\n\u0085\nParagraph four after a"
        " NEL line.\n\u001c\nParagraph five after FS.\n\u2028\n\u1680\u2000\u200a\u202f\u205f"
        "Paragraph six after exotic spaces.\n\v\f\n\u0085Seven begins with NEL, not trimmed\u001f"
        "\n\n\u200bEight begins with ZWSP which is not whitespace\n"
    ),
    "crlf.md": (
        "# CRLF Title\r\n\r\nLine one of a crlf paragraph\r\nline two of it.\r\n\r\nTail.\r\n"
    ),
    "old-mac.md": "# CR Title\rBody text line long enough\r\rSecond part is long enough\r",
    "headings.md": (
        "#\nText heading here\n\nUnder the text heading paragraph.\n\n"
        "## Closing hashes ##\n\nUnder closing hashes paragraph.\n\n"
        "#hashtag is not a heading line at all\n\n"
        "####### seven hashes are not a heading\n\n"
        "```\n# install the thing\npip install something\n```\n\n"
        "   ##   Indented heading   \n\nUnder indented heading text.\n\n"
        "# a\u2028b heading with LS\n\nUnder the LS heading paragraph.\n\n"
        "Text first, long enough\n# Heading inside later\nmore\n\n"
        "#\u00a0NBSP heading\n\nUnder NBSP heading paragraph text.\n\n"
        "#\u0085 NEL heading?\n\nUnder NEL heading paragraph text.\n\n"
        "x\u2029# after PS separator\n\nUnder PS heading paragraph text.\n\n"
        "#\t\u3000Ideographic\u3000 \n\nUnder ideographic heading text.\n\n"
        "# \n# Two in one\n## Second ignored\n\nUnder the first match paragraph.\n\n"
        "# H\n\nshort\n\n## Sub\n\nLong enough paragraph under sub heading.\n"
    ),
    "floor.md": (
        "😀" * 10
        + "\n\n"
        + "😀" * 10
        + "a\n\n"
        + "a" * 20
        + "\n\n"
        + "b" * 21
        + "\n\n"
        + "é" * 21
        + "\n\n"
        + "\u00a0"
        + "c" * 20
        + "\u00a0\n\n"
        + "𝔘" * 11
        + "\n"
    ),
    "invalid-utf8.md": (
        b"Valid start \xff\xfe and \xed\xa0\x80 surrogate bytes and \xf0\x9f\x98 truncated"
        b" emoji, long enough\n\nOverlong \xc0\xaf and \xe0\x80\xaf and lone \x80 continuation"
        b" bytes here\n\n\xf4\x90\x80\x80 beyond U+10FFFF in a long paragraph\n"
    ),
    "bom.md": b"\xef\xbb\xbf# BOM heading\n\nText after the BOM heading, long enough.",
    "empty.md": "",
    "blank.txt": " \n\n\t\n",
    "same-1.md": SAME + "\n\n" + SAME + "\n",
    "controls.txt": 'Quotes " backslash \\ slash / tab\t and \x01\x1f\x7f controls here',
    "no-final-split.txt": "One paragraph only with no separators at all, long enough.",
}

ROADMAPS: dict[str, object | str] = {
    "full": {
        "title": "Cloud Engineer",
        "description": "Runs the cloud",
        "topics": [
            {"label": "Networking", "type": "topic", "level": "beginner"},
            {"label": "VPC", "type": "subtopic", "level": 2},
            {"label": "Roles", "type": "title", "level": 0},
            {"label": "Other", "type": "paragraph"},
            {"label": "", "type": "topic"},
            {"label": 7, "type": "topic", "level": [1, [2, None]]},
            {"label": "Caps", "type": "Topic"},
            {"label": ["a", None], "type": "subtopic", "level": True},
            {"label": {"x": 1}, "type": "title", "level": {}},
            {"label": "Float", "type": "topic", "level": 1e21},
            {"label": "Empty level", "type": "topic", "level": ""},
            {"label": "Array level", "type": "topic", "level": []},
            1,
            "string entry",
            [],
            True,
            {"type": "topic"},
        ],
    },
    "number-title": {"title": 42, "topics": [{"label": "x", "type": "topic"}]},
    "infinite-title": '{"title": 1e400, "topics": [{"label": "x", "type": "topic"}]}',
    "big-int-title": '{"title": 12345678901234567890, "topics": []}',
    "array-title": {
        "title": [None, "a", [1, [2, None]]],
        "topics": [{"label": "l", "type": "title"}],
    },
    "object-title": {"title": {"b": 1, "2": [], "a": {}}, "topics": [1]},
    "true-title": {"title": True, "topics": "abc"},
    "zero-string-title": {"title": "0", "topics": [{"label": "0", "type": "topic", "level": "0"}]},
    "zero-title": {"title": 0, "topics": [{"label": "x", "type": "topic"}]},
    "empty-title": {"title": "", "topics": [{"label": "x", "type": "topic"}]},
    "empty-topics": {"title": "Only role", "description": 0, "topics": []},
    "object-topics": {"title": "Not iterable", "description": [], "topics": {"label": "x"}},
    "number-topics": {"title": "Number topics", "description": {"a": 1}, "topics": 5},
    "null-topic": {
        "title": "Stops",
        "topics": [{"label": "before", "type": "topic"}, None, {"label": "after", "type": "topic"}],
    },
    "tostring-label": {
        "title": "Throws",
        "topics": [
            {"label": "first", "type": "topic"},
            {"label": {"toString": 1}, "type": "topic"},
        ],
    },
    "tostring-title": {"title": {"toString": "x"}, "topics": [1]},
    "nan": '{"title": NaN, "topics": []}',
    "bom": "\ufeff" + json.dumps({"title": "BOM", "topics": []}),
    "empty": "",
    "garbage": '{"title": "x", "topics": []} trailing',
    "trailing-ws": '{"title": "ws ok", "topics": []} \n\t\r ',
    "duplicate-keys": '{"title": "first", "topics": [], "title": "second"}',
    "proto": '{"__proto__": {"title": "hidden"}, "topics": [1]}',
    "lone-surrogate": '{"title": "T\\ud800", "topics": [{"label": "L\\udfff\\ud83d\\ude00",'
    ' "type": "topic", "level": "\\ud800"}]}',
    "top-array": [{"title": "x", "topics": []}],
    "top-null": "null",
    "top-string": '"title"',
    "diagram": {"nodes": [{"id": 1}], "edges": []},
    "control-char": '{"title": "a\tb", "topics": []}',
    "deep": '{"title": "Deep", "topics": [' + "[" * 3000 + "]" * 3000 + ', {"label": "after'
    ' deep", "type": "topic"}]}',
    "deep-title": '{"title": ' + "[" * 2000 + '"x"' + "]" * 2000 + ', "topics": []}',
    "invalid-utf8": (
        b'{"title": "bad \xff byte", "topics": [{"label": "ok \xc0", "type": "topic"}]}'
    ),
    "same-role": {"title": "Cloud Engineer", "description": "Runs the cloud", "topics": []},
    # over the output bound: a 60-deep title (under the depth limit) on 400 topics
    "repeated-deep-title": {
        "title": json.loads("[" * 60 + '"t"' + "]" * 60),
        "topics": [{"label": f"t{i}", "type": "topic"} for i in range(400)],
    },
    # under it: the same title on 30 topics
    "some-deep-title": {
        "title": json.loads("[" * 60 + '"u"' + "]" * 60),
        "topics": [{"label": f"u{i}", "type": "topic"} for i in range(30)],
    },
}


def _put(path: Path, content: bytes | str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)


def _roadmap_bytes(content: object | str | bytes) -> bytes | str:
    if isinstance(content, bytes | str):
        return content
    return json.dumps(content)


def build_edge_corpus(root: Path, outside: Path) -> None:
    """Every discovery, text and roadmap rule of the contract in one corpus.

    `outside` is a folder beside the corpus that links may point to (and must not follow).
    """
    root.mkdir(parents=True, exist_ok=True)
    outside.mkdir(parents=True, exist_ok=True)
    _put(outside / "escaped.md", "This file lives outside the corpus root entirely.")
    for name, content in TEXT_FILES.items():
        _put(root / "text" / name, content)
    for name, roadmap in ROADMAPS.items():
        _put(root / "maps" / "roadmaps" / f"{name}.json", _roadmap_bytes(roadmap))

    # Discovery: names, suffixes, raw folders, roadmap rules.
    long = " is a paragraph that is long enough to keep."
    for rel in [
        "disc/.notes.md",
        "disc/.md",
        "disc/X.MD",
        "disc/y.Md",
        "disc/z.TXT",
        "disc/w.markdown",
        "disc/raw/skipped.md",
        "disc/.raw/walked.md",
        "disc/Raw/walked.md",
        "disc/deep/er/raw/skipped.md",
        "disc/deep/er/ok.md",
        "disc/x.md/inside.md",
        "disc/a.md",
        "disc/a-b.md",
        "disc/a.md.txt",
        "disc/a/inside.md",
        "disc/B.md",
        "raw/area-named-raw.md",
        "raw/raw/skipped.md",
        ".hidden/dot-area.md",
        "order/\uff5e.md",
        "order/😀.md",
        "order/é.md",
        "order/e\u0301.md",
        "order/Z.md",
    ]:
        _put(root / rel, rel + long + "\n\n" + SAME)
    _put(root / "root-file.md", "A file directly in the corpus root is ignored entirely.")
    roadmap_json = json.dumps({"title": "Rule", "topics": [{"label": "t", "type": "topic"}]})
    for rel in [
        "rules/formatted-a.json",
        "rules/Formatted-b.json",
        "rules/formatted-c.JSON",
        "rules/plain.json",
        "rules/myroadmaps.json",
        "rules/Roadmaps/x.json",
        "rules/roadmaps-dir/y.json",
        "roadmaps/z.json",
        "rules/formatted-.md",
    ]:
        _put(root / rel, roadmap_json.replace("Rule", rel))

    # Symlinks: a file reached twice, a followed folder, dangling, escaping, loops.
    _put(root / "links" / "target" / "real.md", "The real file behind a symbolic link.")
    os.symlink("target/real.md", root / "links" / "a-link.md")
    os.symlink("../text", root / "links" / "text-alias")
    os.symlink("missing.md", root / "links" / "dangling.md")
    os.symlink(outside, root / "links" / "outside-dir")
    os.symlink(outside / "escaped.md", root / "links" / "outside.md")
    os.symlink("..", root / "links" / "loop-parent")
    os.symlink("self.md", root / "links" / "self.md")
    os.symlink("../disc/raw", root / "links" / "into-raw")
    os.symlink("text", root / "alias-area")
    os.symlink(outside, root / "outside-area")
    os.link(root / "text" / "basic.md", root / "links" / "hardlink.md")
    os.mkfifo(root / "links" / "fifo.md")
    bad_dir = os.fsencode(root / "names")
    os.makedirs(bad_dir, exist_ok=True)
    with open(os.path.join(bad_dir, b"bad\xff.md"), "wb") as handle:
        handle.write(b"A file whose name is not valid UTF-8 is skipped.")
    _put(root / "names" / "good.md", "The good file next to the badly named one.")


_WORD_TEXT = (
    "cloud vpc subnet lambda queue route table region zone bucket policy role user group "
    "certificate grammar tense clause automaton cell rule glider state kernel index hash "
    "é ü 漢字 😀 𝔘 — “quoted” 'single' / \\ \" tab"
)
WORDS = _WORD_TEXT.split()
SEPARATORS = [
    "\n\n",
    "\n\n\n",
    "\n \n",
    "\n\t\n",
    "\n\u00a0\n",
    "\r\n\r\n",
    "\n\u3000\n",
    "\n\u0085\n",
    "\n\u2028\n",
    "\n\ufeff\n",
    "\n",
    " \n\n ",
]


def _random_paragraph(rng: random.Random) -> str:
    kind = rng.random()
    words = " ".join(rng.choice(WORDS) for _ in range(rng.randrange(1, 30)))
    if kind < 0.15:
        return "#" * rng.randrange(1, 8) + rng.choice([" ", "", "\t", "  "]) + words
    if kind < 0.2:
        return rng.choice(["```\n# comment\ncode\n```", "#tag " + words, words + "\n## inner"])
    if kind < 0.25:
        return rng.choice(["short", "x" * rng.randrange(15, 25), "😀" * rng.randrange(8, 13)])
    return words


def _random_value(rng: random.Random, depth: int = 0) -> object:
    choices: list[object] = [None, True, False, 0, 1, -2.5, 1e21, "", "x", "Topic", [], {}]
    if depth > 2 or rng.random() < 0.6:
        return rng.choice(choices)
    if rng.random() < 0.5:
        return [_random_value(rng, depth + 1) for _ in range(rng.randrange(3))]
    return {"label": _random_value(rng, depth + 1), "b": 1}


def _random_roadmap(rng: random.Random) -> str:
    topics: list[object] = []
    for _ in range(rng.randrange(6)):
        if rng.random() < 0.05:
            topics.append(None)
        elif rng.random() < 0.15:
            topics.append(_random_value(rng))
        else:
            topics.append(
                {
                    "label": rng.choice([" ".join(rng.sample(WORDS, 3)), "", 0, 5, ["a", None]]),
                    "type": rng.choice(["topic", "subtopic", "title", "other", None]),
                    "level": rng.choice([None, 0, 1, 2, "", "advanced", True, [1, 2]]),
                }
            )
    data: dict[str, object] = {
        "title": rng.choice(["Role " + rng.choice(WORDS), "", 0, 3, [1, None], {}, True]),
        "topics": rng.choice([topics, topics, topics, "str", 3, {}]),
    }
    if rng.random() < 0.5:
        data["description"] = rng.choice(["Desc " + rng.choice(WORDS), "", 0, [], {}])
    text = json.dumps(data, ensure_ascii=rng.random() < 0.5)
    return text if rng.random() > 0.05 else text + rng.choice([" x", "", " "])[:2]


def build_random_corpus(root: Path, seed: int, files: int = 120) -> None:
    """A seeded corpus of random Markdown, text and roadmap files with shared paragraphs."""
    rng = random.Random(seed)
    shared = [_random_paragraph(rng) for _ in range(20)]
    areas = [f"area-{c}" for c in "bacd"] + ["Área", "roadmaps"]
    for index in range(files):
        area = rng.choice(areas)
        folder = rng.choice(["", "sub/", "sub/deeper/", "raw/", "Sub/", ".dot/"])
        if rng.random() < 0.15:
            name = rng.choice(["formatted-", "", "plan-"]) + f"r{index}.json"
            _put(root / area / folder / name, _random_roadmap(rng))
            continue
        paragraphs = [
            rng.choice(shared) if rng.random() < 0.2 else _random_paragraph(rng)
            for _ in range(rng.randrange(0, 12))
        ]
        body = "".join(p + rng.choice(SEPARATORS) for p in paragraphs)
        suffix = rng.choice([".md", ".md", ".txt", ".MD", ".rst"])
        _put(root / area / folder / f"{rng.choice(['', 'é', 'Z', '~'])}f{index}{suffix}", body)


# --- deep nesting (issue 40 item 8) --------------------------------------------------------

#: The depths every nesting case is written at: the original converts the first four and
#: overflows JavaScript's stack (String() of arrays) on the last two.
NESTING_DEPTHS = (100, 1_000, 1_500, 3_000, 4_000, 5_000)
#: Where the nested value sits in a roadmap.
NESTED_FIELDS = ("level", "label", "description", "title")


def nested(depth: int, inner: str = '"x"') -> str:
    """JSON text of `inner` inside `depth` arrays."""
    return "[" * depth + inner + "]" * depth


def nested_objects(depth: int, inner: str = '"x"') -> str:
    """JSON text of `inner` inside `depth` objects (String() stops at the first one)."""
    return '{"k": ' * depth + inner + "}" * depth


def deep_roadmap(field: str, value: str, tag: str = "", padding: int = 0) -> str:
    """A roadmap whose `field` is the JSON text `value`, between two ordinary topics.

    `tag` goes into every other statement, so files that differ only in depth do not
    collapse into one another's chunks. `padding` characters of an unused string make
    the file large enough for the output bound to admit a deep title's heading (it grows
    with the square of the depth); a padded roadmap has no topics, so the heading is
    written once (the role line).
    """
    title = value if field == "title" else '"Deep Role"'
    description = value if field == "description" else f'"roles nested deep{tag}"'
    deep_entry = {
        "level": f'{{"label": "deep{tag}", "type": "topic", "level": {value}}}',
        "label": f'{{"label": {value}, "type": "topic", "level": "deep{tag}"}}',
    }.get(field, f'{{"label": "middle{tag}", "type": "subtopic"}}')
    before = f'{{"label": "before{tag}", "type": "topic"}}'
    after = f'{{"label": "after{tag}", "type": "title"}}'
    topics = f"[{before}, {deep_entry}, {after}]"
    pad = ""
    if padding:
        pad, topics = f', "padding": "{" " * padding}"', "[]"
    return f'{{"title": {title}, "description": {description}{pad}, "topics": {topics}}}'


#: The roadmap of issue 40 item 8: 3 KB, its `level` nested 1,500 arrays deep. The
#: original writes two small chunks of it, the second `Role: Deep Role - Topic: deep (x)`.
ISSUE_ROADMAP = (
    '{"title": "Deep Role", "topics": [{"label": "deep", "type": "topic", "level": '
    + "[" * 1_500 + '"x"' + "]" * 1_500 + "}]}"
)


def build_deep_corpus(root: Path, field: str, depths: tuple[int, ...] = NESTING_DEPTHS) -> None:
    """One roadmap per depth with `field` nested that deep in arrays, the issue's roadmap,
    and beside them what must not matter: a key nobody reads and a topic entry that is
    not an object, nested 200,000 deep. Titles are written twice: as they come (the
    output bound refuses the deeper ones), and padded so the bound admits a title up to
    3,000 deep; a title nested 5,000 deep through objects (String() gives
    `[object Object]`, JSON.stringify overflows) is padded past the bound too."""
    folder = root / "deep" / "roadmaps"
    folder.mkdir(parents=True, exist_ok=True)
    for depth in depths:
        value, tag = nested(depth, f'"x{depth}"'), f" {depth}"
        text = deep_roadmap(field, value, tag)
        (folder / f"{field}-{depth:05}.json").write_text(text, encoding="utf-8")
        if field == "title" and depth <= 3_000:
            padded = deep_roadmap(field, nested(depth, f'"p{depth}"'), tag, depth * depth // 12)
            (folder / f"{field}-{depth:05}-padded.json").write_text(padded, encoding="utf-8")
    if field == "title":
        padded = deep_roadmap(field, nested_objects(5_000), " objects", 5_000 * 5_000 // 12)
        (folder / "title-objects-05000-padded.json").write_text(padded, encoding="utf-8")
    (folder / "issue-40-item-8.json").write_text(ISSUE_ROADMAP, encoding="utf-8")
    unused = nested(200_000)
    (folder / "unused-keys.json").write_text(
        '{"title": "Unused", "extra": ' + unused + ', "topics": [' + unused
        + ', {"label": "kept", "type": "topic", "level": ' + nested(3) + "}]}",
        encoding="utf-8",
    )
