"""JavaScript semantics, checked against Node.js itself wherever a value is involved."""

from __future__ import annotations

import json
import math
import random
import struct
import tracemalloc
from typing import Any

import pytest

from brain_pipeline.corpus.jscompat import (
    JS_STRING_MAX_ARRAY_DEPTH,
    JS_WHITESPACE,
    UNBUILT,
    JSONSyntaxError,
    JSRangeError,
    JSTypeError,
    is_truthy,
    join_surrogate_pairs,
    js_property_order,
    js_string,
    json_stringify,
    json_stringify_size,
    number_to_string,
    parse_json,
    parse_json_iterative,
    quote,
    utf8_bytes,
    utf16_length,
)


def test_whitespace_set_is_exactly_javascripts(node: Any) -> None:
    codes = node(
        "const out=[];for(let c=0;c<0x10000;c++){if(/\\s/.test(String.fromCharCode(c)))"
        "out.push(c)}return out;",
        None,
    )
    assert sorted(ord(c) for c in JS_WHITESPACE) == codes
    trimmed = node(
        "const out=[];for(let c=0;c<0x10000;c++){if(String.fromCharCode(c).trim()==='')"
        "out.push(c)}return out;",
        None,
    )
    assert trimmed == codes


@pytest.mark.parametrize("char", ["\u0085", "\u001c", "\u001d", "\u001e", "\u001f", "\u200b"])
def test_python_whitespace_that_javascript_does_not_trim(char: str) -> None:
    assert (char + "x" + char).strip(JS_WHITESPACE) == char + "x" + char


def test_utf16_length_counts_astral_characters_twice() -> None:
    assert utf16_length("abc") == 3
    assert utf16_length("é😀") == 3
    assert utf16_length("😀" * 10) == 20


def _random_doubles(rng: random.Random, count: int) -> list[float]:
    values: list[float] = []
    while len(values) < count:
        kind = rng.randrange(5)
        if kind == 0:
            x = struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0]
        elif kind == 1:
            x = rng.uniform(-1e6, 1e6)
        elif kind == 2:
            x = float(rng.randrange(-(10**22), 10**22))
        elif kind == 3:
            x = rng.choice([1, -1]) * 10.0 ** rng.randrange(-330, 310) * rng.random()
        else:
            x = round(rng.uniform(-1000, 1000), rng.randrange(0, 8))
        if math.isfinite(x):
            values.append(x)
    return values


def test_number_to_string_matches_node(node: Any) -> None:
    rng = random.Random(7)
    edge = [0.0, -0.0, 1e21, 1e20, 1e-7, 1e-6, 123e-20, 5e-324, -5e-324, 1.7976931348623157e308]
    edge += [2.0**53, 12345678901234567890.0, 0.1, 100.0, 1.5e300, 0.000001234, 123456.789e3]
    values = edge + _random_doubles(rng, 3000)
    expected = node("return input.map(String);", values)
    assert [number_to_string(v) for v in values] == expected


def test_non_finite_numbers() -> None:
    assert number_to_string(math.inf) == "Infinity"
    assert number_to_string(-math.inf) == "-Infinity"
    assert number_to_string(math.nan) == "NaN"
    assert json_stringify(math.inf) == "null"


def test_truthiness() -> None:
    for falsy in (None, False, 0.0, -0.0, math.nan, "", 0):
        assert not is_truthy(falsy)
    truthy_values: list[object] = [[], {}, "0", " ", 1e-300, True, math.inf, [0]]
    for truthy in truthy_values:
        assert is_truthy(truthy)


JSON_VALUES = [
    '[null,"a",[1,[2,null]]]',
    "[[],[[]],[null],[[null,null]]]",
    '[{},{"a":1},true,false,1e400,-0,1e21,0.1]',
    '{"a":1}',
    '"\\ud800 lone"',
    "12345678901234567890",
    "[1e-7,123e-20,5e-324]",
    '["x",["\\ud83d","\\ude00"]]',
]


def test_js_string_matches_node(node: Any) -> None:
    values = [parse_json(text) for text in JSON_VALUES]
    expected = node("return input.map(t=>String(JSON.parse(t)));", JSON_VALUES)
    assert [js_string(v) for v in values] == expected


def test_object_owning_tostring_cannot_be_converted(node: Any) -> None:
    thrown = node(
        "return input.map(t=>{try{return String(JSON.parse(t))}catch(e){return 'THROW'}});",
        ['{"toString":1}', '[1,{"toString":"x"}]', '{"valueOf":1}', '[{"a":{"toString":1}}]'],
    )
    assert thrown == ["THROW", "THROW", "[object Object]", "[object Object]"]
    for text in ('{"toString":1}', '[1,{"toString":"x"}]'):
        with pytest.raises(JSTypeError):
            js_string(parse_json(text))
    assert js_string(parse_json('{"valueOf":1}')) == "[object Object]"


STRINGIFY_VALUES = [
    "[]",
    "{}",
    '[1,[2,[]],{"b":{},"1":[null,1e400,"\\ud800x"]}]',
    '{"b":1,"4294967294":2,"4294967295":3,"1":4,"01":5,"-1":6,"0":7,"a":{"z":1,"2":[]}}',
    '{"a":1,"b":2,"a":3}',
    '["\\u0000\\u001f\\b\\f\\n\\r\\t\\"\\\\/\\u007f\\u2028\\u2029\\ud83d\\ude00\\udfff"]',
    "[[[[[[1]]]]]]",
    '[{"":{"":[{"":null}]}}]',
    "1e21",
    '"x"',
]


@pytest.mark.parametrize("level", [0, 2])
def test_json_stringify_matches_node(node: Any, level: int) -> None:
    expected = node(
        "return input.map(t=>JSON.stringify(JSON.parse(t),null,2));",
        STRINGIFY_VALUES,
    )
    for text, want in zip(STRINGIFY_VALUES, expected, strict=True):
        got = json_stringify(parse_json(text), "  ", level)
        if level:  # a value nested `level` deep gets that much more indentation per line
            want = want.replace("\n", "\n" + "  " * level)
        assert got == want, text


def test_property_order_puts_array_indices_first() -> None:
    obj = {"b": 1, "10": 2, "2": 3, "02": 4, "4294967295": 5, "4294967294": 6}
    assert js_property_order(obj) == ["2", "10", "4294967294", "b", "02", "4294967295"]


def test_quote_matches_json_stringify_for_every_bmp_code_point(node: Any) -> None:
    text = "".join(chr(c) for c in range(0x10000))
    assert quote(text) == node("return JSON.stringify(input);", text)


def test_quote_escapes_lone_surrogates_lower_case() -> None:
    assert quote("a\ud800b\udfff") == '"a\\ud800b\\udfff"'
    assert quote("\ud83d\ude00") == '"😀"'  # a pair is one character, written raw


def test_utf8_bytes_replaces_lone_surrogates_like_node(node: Any) -> None:
    samples = ["\ud800", "a\udc00b", "\ud83d\ude00", "\ude00\ud83d", "plain é"]
    expected = node("return input.map(s=>Buffer.from(s,'utf8').toString('hex'));", samples)
    assert [utf8_bytes(s).hex() for s in samples] == expected


def test_join_surrogate_pairs_keeps_lone_ones() -> None:
    assert join_surrogate_pairs("\ud83d\ude00\ud800") == "😀\ud800"


# --- JSON.parse -------------------------------------------------------------------------

PARSE_CASES = [
    "",
    " ",
    "\ufeff{}",
    "NaN",
    "Infinity",
    "-Infinity",
    "[NaN]",
    "{} x",
    "{}  \n\t\r",
    "[1,]",
    '{"a":1,}',
    "01",
    "1.",
    ".5",
    "-",
    "+1",
    "1e",
    "1e+",
    "0x10",
    '"\\x41"',
    '"\\u00e9\\u00E9"',
    '"\\ud800"',
    '"a\tb"',
    '"\x7f"',
    "'a'",
    "[1 2]",
    '{"a" 1}',
    "{a:1}",
    "tru",
    "nulls",
    "\u00a0[]",
    "\u2028[]",
    "[\u0661]",
    "12345678901234567890",
    "1e400",
    "-1e400",
    "-0",
    "[-0.0e-0]",
    '{"__proto__":{"title":"x"}}',
    '"\\/"',
    "[" * 50 + "]" * 50,
    "[" * 50 + "]" * 49,
]


def _python_parse(parser: Any, text: str) -> Any:
    try:
        return {"ok": parser(text)}
    except JSONSyntaxError:
        return "ERROR"


def _canonical(value: Any) -> Any:
    """Compare as Node would print it: JSON.stringify of the parsed value."""
    return value if value == "ERROR" else json_stringify(value["ok"])


@pytest.mark.parametrize("parser", [parse_json, parse_json_iterative])
def test_parse_grammar_matches_json_parse(node: Any, parser: Any) -> None:
    expected = node(
        "return input.map(t=>{try{return JSON.stringify(JSON.parse(t),null,2)}"
        "catch(e){return 'ERROR'}});",
        PARSE_CASES,
    )
    got = [_canonical(_python_parse(parser, text)) for text in PARSE_CASES]
    assert got == expected


def test_numbers_are_doubles() -> None:
    assert parse_json("12345678901234567890") == 12345678901234567000.0
    assert parse_json("[5]") == [5.0] and isinstance(parse_json("[5]")[0], float)
    assert parse_json("1e400") == math.inf


def test_deep_nesting_has_no_depth_limit() -> None:
    depth = 200_000
    value = parse_json("[" * depth + "]" * depth)
    for _ in range(depth - 1):
        value = value[0]
    assert value == []
    nested_objects = '{"a":' * 5000 + "1" + "}" * 5000
    assert js_string(parse_json(nested_objects)) == "[object Object]"
    assert json_stringify(parse_json("[" * 3000 + "]" * 3000)).count("\n") == 2 * 2999


def test_iterative_parser_equals_c_parser_on_random_documents() -> None:
    rng = random.Random(11)

    def value(depth: int) -> Any:
        kind = rng.randrange(7 if depth < 6 else 4)
        if kind == 0:
            return rng.choice([None, True, False])
        if kind == 1:
            return rng.choice([0.5, -3.0, 1e300, 12.0, -0.0])
        if kind == 2:
            return "".join(rng.choice('ab"\\\n\u00e9\ud83d\ude00\t') for _ in range(5))
        if kind == 3:
            return rng.choice(["", "x"])
        if kind in (4, 5):
            return [value(depth + 1) for _ in range(rng.randrange(4))]
        return {rng.choice(["a", "b", "1", "0", "c"]): value(depth + 1) for _ in range(3)}

    for _ in range(300):
        text = json.dumps(value(0), indent=rng.choice([None, 1]))
        assert json_stringify(parse_json_iterative(text)) == json_stringify(parse_json(text))


def _cut(value: Any, depth: int) -> Any:
    """`value` with every container nested deeper than `depth` replaced by UNBUILT."""
    if not isinstance(value, list | dict):
        return value
    if depth == 0:
        return UNBUILT
    if isinstance(value, list):
        return [_cut(item, depth - 1) for item in value]
    return {key: _cut(item, depth - 1) for key, item in value.items()}


@pytest.mark.parametrize("build_depth", [0, 1, 2, 3])
def test_containers_past_the_build_depth_are_checked_not_built(build_depth: int) -> None:
    """Unbuilt parts obey JSON.parse's grammar all the same (the Node-checked cases), and
    what is built is what a full parse gives."""
    for text in PARSE_CASES:
        full = _python_parse(parse_json_iterative, text)
        cut = _python_parse(lambda t: parse_json_iterative(t, build_depth), text)
        assert cut == (full if full == "ERROR" else {"ok": _cut(full["ok"], build_depth)}), text
    rng = random.Random(build_depth)
    for _ in range(200):
        value = json.loads(json.dumps(_random_nested(rng, 7)), parse_int=float)
        text = json.dumps(value, indent=rng.choice([None, 1]))
        assert parse_json_iterative(text, build_depth) == _cut(value, build_depth)
        broken_texts = (text[:-1], text + "]", text.replace("]", "}", 1), text.replace(",", ""))
        for broken in broken_texts:
            if _python_parse(parse_json_iterative, broken) == "ERROR":
                cut = _python_parse(lambda t: parse_json_iterative(t, build_depth), broken)
                assert cut == "ERROR"


def _random_nested(rng: random.Random, depth: int) -> Any:
    if depth == 0 or rng.random() < 0.2:
        return rng.choice([1, "s", None, True, [], {}, 'q"\\'])
    if rng.random() < 0.5:
        return [_random_nested(rng, depth - 1) for _ in range(rng.randrange(1, 4))]
    return {f"k{i}": _random_nested(rng, depth - 1) for i in range(rng.randrange(1, 4))}


def test_a_file_nested_millions_deep_is_checked_in_memory_of_its_size() -> None:
    depth = 2_000_000
    text = "[" * depth + "[ 1 ]" + "]" * depth
    tracemalloc.start()
    try:
        value = parse_json(text, 100)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2 * len(text)  # a list per level would take 50 times the file
    spaced = "[" * depth + "[ 1 ]" + " ]" * depth
    for parsed in (value, parse_json(spaced, 100)):
        for _ in range(100):
            (parsed,) = parsed
        assert parsed is UNBUILT
    for broken in (text[:-1], spaced[:-1], text + "]", spaced.replace("[ 1 ]", "[ 1 }")):
        with pytest.raises(JSONSyntaxError):
            parse_json(broken, 100)


def test_string_overflows_where_javascript_does(node: Any) -> None:
    """Past JS_STRING_MAX_ARRAY_DEPTH arrays String() throws RangeError (V8's stack); well
    below, it joins as Node does. The exact depth depends on the caller's stack, so it is
    pinned against the reference ingest in test_differential; here Node at least agrees
    on either side of it, with a margin."""
    shallow, deep = JS_STRING_MAX_ARRAY_DEPTH - 200, JS_STRING_MAX_ARRAY_DEPTH + 200
    texts = ["[" * d + '[1,null,"a",[2]]' + "]" * d for d in (shallow, deep)]
    said = node(
        "return input.map(t=>{try{return String(JSON.parse(t))}"
        "catch(e){return e instanceof RangeError ? 'RangeError' : 'other'}});",
        texts,
    )
    assert said[0] == js_string(parse_json(texts[0])) == "1,,a,2"
    assert said[1] == "RangeError"
    with pytest.raises(JSRangeError):
        js_string(parse_json(texts[1]))


@pytest.mark.parametrize("gap", ["", "  ", "\t"])
def test_stringify_with_any_gap_matches_node_and_its_size(node: Any, gap: str) -> None:
    """An empty gap is JavaScript's compact form (no newlines, `:` without a space): the
    readable heading of a title nested past Python's recursion limit is written so."""
    values = [[[1, {"a": [None, "x\u00e9"], "b": {}, "1": []}], []], {"k": [[["t"]]]}, "s", 2.5]
    expected = node(f"return input.map(v => JSON.stringify(v, null, {json.dumps(gap)}));", values)
    for value, text in zip(values, expected, strict=True):
        assert json_stringify(value, gap) == text
        assert json_stringify_size(value, gap) == len(text.encode("utf-8"))
