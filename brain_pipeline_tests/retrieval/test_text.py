"""The agent's tokenizer: stopwords, stemming, splitting and JavaScript lower-casing."""

from __future__ import annotations

import random
import re

import pytest

from brain_pipeline.retrieval.text import STOPWORDS, clear_memo, stem, tokenize

# Typed from the specification, independently of the module's own literal.
SPEC_STOPWORDS = re.findall(
    r"\w+",
    """a about after all also am an and any are as at be because been before
being between both but by can could did do does doing done down during each few for from
further had has have having he her here hers him his how however i if in into is it its
itself just me more most my no nor not now of off on once only or other our out over own
same she should so some such than that the their theirs them then there these they this
those through to too under until up us very was we were what when where whether which
while who whom why will with would you your yours""",
)


def test_stopwords_are_exactly_the_specified_list() -> None:
    assert frozenset(SPEC_STOPWORDS) == STOPWORDS
    assert len(SPEC_STOPWORDS) == len(STOPWORDS)


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        ("automata", "automaton"),
        ("phenomena", "phenomenon"),
        ("criteria", "criterion"),
        ("indices", "index"),
        ("matrices", "matrix"),
        ("vertices", "vertex"),
        ("analyses", "analysis"),
        ("hypotheses", "hypothesis"),
        ("data", "datum"),  # irregulars win before any length rule
        ("studies", "study"),
        ("flies", "fly"),
        ("ties", "tie"),  # 4 letters: too short for -ies, falls through to -s
        ("boxes", "box"),
        ("churches", "church"),
        ("wishes", "wish"),
        ("buzzes", "buzz"),
        ("classes", "class"),
        ("axes", "axe"),  # 4 letters: too short for -es
        ("cats", "cat"),
        ("uses", "use"),
        ("glass", "glass"),
        ("virus", "virus"),
        ("analysis", "analysis"),
        ("gas", "gas"),  # 3 letters: too short for -s
        ("constructor", "constructor"),  # deliberate deviation from the JS object lookup
        ("tostring", "tostring"),
        ("hasownproperty", "hasownproperty"),
        ("2000s", "2000"),
        ("runes", "rune"),
    ],
)
def test_stem(word: str, expected: str) -> None:
    assert stem(word) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The Cats and the Dogs", ["cat", "dog"]),
        ("e-mail x86_64 C++ 2024", ["mail", "x86", "64", "2024"]),
        ("a I of to", []),
        ("wills", ["will"]),  # stopwords are removed before stemming, not after
        ("US us Us", []),
        ("", []),
        ("İstanbul", ["stanbul"]),  # İ lower-cases to "i" + U+0307: a dropped 1-letter piece
        ("\u212aelvin", ["kelvin"]),  # the Kelvin sign lower-cases to ASCII k
        ("naïve café", ["na", "ve", "caf"]),
        ("ＡＢ ÀB", []),
        ("\ud800ab", ["ab"]),  # a lone surrogate is just a separator
        ("Matrices INDICES", ["matrix", "index"]),
        ("tab\tnew\nline\x00nul", ["tab", "new", "line", "nul"]),
    ],
)
def test_tokenize(text: str, expected: list[str]) -> None:
    assert tokenize(text) == expected


def plain_tokenize(text: str) -> list[str]:
    """The specification read literally: split, filter, stem."""
    pieces = re.split(r"[^a-z0-9]+", text.lower())
    return [stem(p) for p in pieces if len(p) >= 2 and p not in STOPWORDS]


def test_tokenize_matches_the_literal_definition_on_random_text() -> None:
    rng = random.Random(7)
    alphabet = "abcdeisuxz019 -_.,ABCSÉéİ\u212aß\u0307\t\n\ud83d\U0001f600" + "".join(STOPWORDS)
    words = [*STOPWORDS, *(w.upper() for w in STOPWORDS), "classes", "Data", "studies"]
    for _ in range(2000):
        parts = [
            rng.choice(words) if rng.random() < 0.3 else "".join(rng.choices(alphabet, k=5))
            for _ in range(rng.randint(0, 12))
        ]
        text = rng.choice([" ", "", "-", "é"]).join(parts)
        assert tokenize(text) == plain_tokenize(text), text


def test_memo_does_not_change_results() -> None:
    text = "Studies of matrices and the data of buzzes"
    warm = tokenize(text)
    clear_memo()
    assert tokenize(text) == warm == ["study", "matrix", "datum", "buzz"]


def test_only_two_non_ascii_characters_lower_case_to_ascii_alphanumerics() -> None:
    """Pins the premise of the JavaScript-compatibility note in text.py.

    Node 20's toLowerCase was compared with str.lower over every code point: they differ
    only on letters newer than Python's Unicode tables, all lower-casing to non-ASCII.
    """
    ascii_alnum = re.compile(r"[a-z0-9]")
    producing = {cp for cp in range(0x80, 0x110000) if ascii_alnum.search(chr(cp).lower())}
    assert producing == {0x130, 0x212A}
    assert "\u0130".lower() == "i\u0307"
    assert "\u212a".lower() == "k"
