"""The JavaScript semantics the knowledge-store contract depends on.

The original ingest script ran on Node.js, so its output is defined by JavaScript's
whitespace class, truthiness, `String()`, Number::toString, `JSON.parse` and
`JSON.stringify`. Python's nearest equivalents differ in small ways (its `\\s` includes
U+0085 and U+001C-U+001F but not U+FEFF, its JSON parser accepts `NaN` and recurses, its
strings can hold lone surrogates that UTF-8 cannot encode), and every one of those
differences changes bytes in the store. This module is the one place that knows them.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator
from json.decoder import scanstring as _scanstring  # type: ignore[attr-defined]
from json.encoder import encode_basestring as _quote_string  # the C encoder when available
from typing import Any, cast

# --- whitespace ---------------------------------------------------------------------------

#: JavaScript's WhiteSpace + LineTerminator code points: what `\s` matches and what
#: `String.prototype.trim` removes. Deliberately NOT U+0085 or U+001C-U+001F.
JS_WHITESPACE = (
    "\t\n\v\f\r \u00a0\u1680"
    "\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000\ufeff"
)
#: The same set as a regular-expression character class body.
JS_WS_CLASS = r"\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"


_ASTRAL = re.compile("[\U00010000-\U0010ffff]")


def utf16_length(text: str) -> int:
    """`string.length` in JavaScript: UTF-16 code units, so astral characters count 2."""
    if text.isascii():
        return len(text)
    return len(text) + len(_ASTRAL.findall(text))


# --- lone surrogates ----------------------------------------------------------------------

_SURROGATE = re.compile("[\ud800-\udfff]")


def join_surrogate_pairs(text: str) -> str:
    """Merge adjacent high+low surrogate code points into one astral character.

    A JavaScript string is UTF-16, so a high surrogate followed by a low one *is* the
    astral character; Python keeps them apart. Lone surrogates are left as they are.
    """
    if not _SURROGATE.search(text):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def utf8_bytes(text: str) -> bytes:
    """UTF-8 bytes as Node.js produces them for a string: lone surrogates become U+FFFD."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", join_surrogate_pairs(text)).encode("utf-8")


def escape_lone_surrogates(json_text: str) -> str:
    """Write lone surrogates as JSON.stringify does (lower-case `\\udxxx` escapes).

    Valid only on JSON text, where every surrogate sits inside a string literal and two
    literals are never adjacent, so pairs can be joined across the whole text at once.
    """
    joined = join_surrogate_pairs(json_text)
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", joined)


#: `quote` without the lone-surrogate pass, for callers that escape a whole text at once.
quote_raw = cast("Callable[[str], str]", _quote_string)


def quote(text: str) -> str:
    """A string literal exactly as JSON.stringify writes it.

    Python's C `encode_basestring` already matches JavaScript for everything except lone
    surrogates: `"` and `\\` escaped, `\\b \\f \\n \\r \\t` short forms, other controls as
    lower-case `\\u00xx`, and `/`, U+007F, U+2028, U+2029 and non-ASCII left raw.
    """
    quoted: str = _quote_string(text)
    if text.isascii() or not _SURROGATE.search(quoted):
        return quoted
    return escape_lone_surrogates(quoted)


# --- values -------------------------------------------------------------------------------


class JSError(Exception):
    """What JavaScript would throw while converting or reading a JSON value."""


class JSTypeError(JSError, TypeError):
    """What JavaScript would throw as a TypeError while converting or reading a value."""


class JSRangeError(JSError):
    """V8's `RangeError: Maximum call stack size exceeded` for a value nested too deep."""


#: The most arrays `String()` (Array.prototype.join, which recurses into nested arrays)
#: converts in one chain before V8 runs out of call stack: 3,154 convert, 3,155 throw
#: RangeError. Measured with Node.js 20 (V8 11.3) running the reference ingest, the same
#: for a roadmap's title, description, label and level and whatever the innermost value;
#: the test suite measures it again against the installed Node. It is a property of the
#: engine's stack, not of JSON: a deeper caller or another Node version moves it by a
#: few levels, so this is the original's behaviour as closely as it can be pinned.
JS_STRING_MAX_ARRAY_DEPTH = 3_154
#: The deepest value (arrays and objects) a roadmap `title` can have for the original to
#: write its store: JSON.stringify(chunks, null, 2) recurses too, and a heading nested
#: 4,098 deep throws RangeError there (4,097 is written; measured as above). Only a
#: title whose chain passes through objects gets this deep (String() stops at an object),
#: and then the original wrote no store at all.
JS_STRINGIFY_MAX_DEPTH = 4_097


def is_truthy(value: Any) -> bool:
    """JavaScript truthiness for JSON values: `[]` and `{}` are truthy, `0`, `""` are not."""
    if value is None or value is False:
        return False
    if value is True:
        return True
    if isinstance(value, float):
        return not (value == 0.0 or math.isnan(value))
    if isinstance(value, int | str):
        return bool(value)
    return True


def number_to_string(value: float) -> str:
    """ECMAScript Number::toString(x) for radix 10.

    Python's `repr` already yields the shortest round-tripping digits; only the choice
    between plain and exponent notation (and the spelling of the exponent) differs.
    """
    if math.isnan(value):
        return "NaN"
    if value == 0:
        return "0"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    sign = "-" if value < 0 else ""
    mantissa, _, exponent = repr(abs(float(value))).partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = whole + fraction
    point = len(whole) + (int(exponent) if exponent else 0)  # value = 0.digits * 10**point
    stripped = digits.lstrip("0")
    point -= len(digits) - len(stripped)
    digits = stripped.rstrip("0")
    k, n = len(digits), point
    if k <= n <= 21:
        text = digits + "0" * (n - k)
    elif 0 < n <= 21:
        text = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        text = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        exp = f"e{'+' if e >= 0 else '-'}{abs(e)}"
        text = digits + exp if k == 1 else digits[0] + "." + digits[1:] + exp
    return sign + text


def _scalar_to_string(value: Any) -> str:
    """ToString for anything but an array (objects throw when they own `toString`)."""
    if isinstance(value, str):
        return value
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int | float):
        return number_to_string(float(value))
    if isinstance(value, dict):
        # OrdinaryToPrimitive: an own, non-callable `toString` is skipped, then valueOf
        # returns the object itself, so the conversion throws.
        if "toString" in value:
            raise JSTypeError("Cannot convert object to primitive value")
        return "[object Object]"
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def _array_to_string(array: list[Any]) -> str:
    """Array.prototype.join(","): null elements give "", nested arrays join recursively.

    Iterative, because JSON input may nest arrays deeper than Python's recursion limit;
    a chain of more than JS_STRING_MAX_ARRAY_DEPTH arrays raises JSRangeError where V8
    overflows its stack, before anything deeper is looked at.
    """
    parts: list[str] = []
    stack = [iter(array)]
    first = [True]
    while stack:
        for item in stack[-1]:
            if not first[-1]:
                parts.append(",")
            first[-1] = False
            if isinstance(item, list):
                if len(stack) >= JS_STRING_MAX_ARRAY_DEPTH:
                    raise JSRangeError(
                        f"String() of arrays nested more than {JS_STRING_MAX_ARRAY_DEPTH:,} "
                        "deep (RangeError: Maximum call stack size exceeded)"
                    )
                stack.append(iter(item))
                first.append(True)
                break
            if item is not None:
                parts.append(_scalar_to_string(item))
        else:
            stack.pop()
            first.pop()
    return "".join(parts)


def js_string(value: Any) -> str:
    """JavaScript `String(value)` (and template-literal interpolation) for JSON values."""
    if isinstance(value, list):
        return _array_to_string(value)
    return _scalar_to_string(value)


def nesting_depth(value: Any) -> int:
    """How many arrays/objects deep `value` nests (0 for a primitive, 1 for `[1]`).

    What JSON.stringify recurses through. An unbuilt container (see `parse_json`) counts
    its own level only, so the answer is a lower bound there: enough for a caller whose
    limit is shallower than the build depth it parsed with. Iterative, for any depth.
    """
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, Unbuilt):
            deepest = max(deepest, depth)  # at least: what it held was not kept
        elif isinstance(item, list | dict):
            deepest = max(deepest, depth)
            children = item if isinstance(item, list) else item.values()
            stack.extend((c, depth + 1) for c in children if isinstance(c, list | dict | Unbuilt))
    return deepest


# --- JSON.stringify -----------------------------------------------------------------------

_ARRAY_INDEX = re.compile(r"0|[1-9][0-9]{0,9}")


def _is_array_index(key: str) -> bool:
    return _ARRAY_INDEX.fullmatch(key) is not None and int(key) < 4294967295


def js_property_order(obj: dict[str, Any]) -> list[str]:
    """Own-key order of a JavaScript object: array-index keys ascending, then insertion."""
    indices = [k for k in obj if _is_array_index(k)]
    if not indices:
        return list(obj)
    rest = [k for k in obj if not _is_array_index(k)]
    return sorted(indices, key=int) + rest


def _primitive_json(value: Any) -> str:
    """A JSON value that is not a container, as JSON.stringify writes it."""
    if isinstance(value, str):
        return quote(value)
    if isinstance(value, float) and not math.isfinite(value):
        return "null"
    if isinstance(value, dict):
        raise TypeError("not a primitive JSON value: dict")
    return _scalar_to_string(value)


def json_stringify(value: Any, indent: str = "  ", level: int = 0) -> str:
    """`JSON.stringify(value, null, indent)` for JSON values, starting `level` deep.

    `level` lets the store writer embed a value that sits inside its own indentation.
    An empty `indent` writes the compact form, as JavaScript does for an empty gap.
    Iterative for the same reason as `_array_to_string`.
    """
    if not isinstance(value, list | dict):
        return _primitive_json(value)
    out: list[str] = []
    colon = ": " if indent else ":"
    # Each frame: (remaining items iterator, closing bracket, depth, is_first)
    stack: list[list[Any]] = []

    def open_container(container: list[Any] | dict[str, Any], depth: int) -> None:
        brackets = "[]" if isinstance(container, list) else "{}"
        if not container:
            out.append(brackets)
            return
        out.append(brackets[0])
        items: Iterator[tuple[str | None, Any]]
        if isinstance(container, list):
            items = iter([(None, v) for v in container])
        else:
            items = iter([(k, container[k]) for k in js_property_order(container)])
        stack.append([items, brackets[1], depth, True])

    open_container(value, level)
    while stack:
        frame = stack[-1]
        items, closing, depth, first = frame
        pad = "\n" + indent * (depth + 1) if indent else ""
        for key, item in items:
            out.append(pad if first else "," + pad)
            first = frame[3] = False
            if key is not None:
                out.append(quote(key) + colon)
            if isinstance(item, list | dict):
                open_container(item, depth + 1)
                if item:
                    break
            else:
                out.append(_primitive_json(item))
        else:
            stack.pop()
            out.append("\n" + indent * depth + closing if indent else closing)
    return "".join(out)


def _utf8_size(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8"))


def json_stringify_size(value: Any, indent: str = "  ", level: int = 0) -> int:
    """UTF-8 bytes of `json_stringify(value, indent, level)`, without building the text.

    An indented nested value grows with the square of its depth; the ingest must know
    how large a roadmap title's heading would be before writing it once per topic.
    Walks the value once (iteratively) and counts the padding arithmetically.
    """
    if not isinstance(value, list | dict):
        return _utf8_size(_primitive_json(value))
    width = len(indent)
    newline = 1 if indent else 0  # an empty indent writes the compact form
    colon = 2 if indent else 1
    total = 0
    stack: list[tuple[Any, int]] = [(value, level)]
    while stack:
        container, depth = stack.pop()
        if not container:
            total += 2  # [] or {}
            continue
        # the brackets, one newline + padding before every member and before the close
        total += 2 + len(container) * (newline + width * (depth + 1)) + newline + width * depth
        total += len(container) - 1  # the commas
        items = container if isinstance(container, list) else container.values()
        if isinstance(container, dict):
            total += sum(_utf8_size(quote(key)) + colon for key in container)
        for item in items:
            if isinstance(item, list | dict):
                stack.append((item, depth + 1))
            else:
                total += _utf8_size(_primitive_json(item))
    return total


# --- JSON.parse ---------------------------------------------------------------------------


class JSONSyntaxError(ValueError):
    """The text is not accepted by JavaScript's JSON.parse."""


def _reject_constant(name: str) -> Any:
    raise JSONSyntaxError(f"{name} is not valid JSON")


_DECODER = json.JSONDecoder(parse_int=float, parse_constant=_reject_constant, strict=True)


class Unbuilt:
    """An array or object `parse_json` checked but did not build (nested past `build_depth`).

    Truthy, as every array and object is; never a string, so no roadmap field test
    matches it. Converting it is a bug: the caller chose a `build_depth` deeper than any
    conversion it makes can reach (JS_STRING_MAX_ARRAY_DEPTH, JS_STRINGIFY_MAX_DEPTH).
    """

    __slots__ = ()

    def __repr__(self) -> str:
        return "UNBUILT"


#: The one `Unbuilt` value: what every container past `build_depth` parses to.
UNBUILT = Unbuilt()


def parse_json(text: str, build_depth: int | None = None) -> Any:
    """JSON.parse: strict grammar, every number a double, any nesting depth.

    Python's C scanner agrees with JSON.parse once `NaN`/`Infinity` are refused and
    integers are read as floats; only its recursion limit differs, so deeply nested
    documents fall back to an iterative parser with the same grammar. With
    `build_depth`, containers nested deeper than that are checked (the whole text must
    still be valid JSON, as for JSON.parse) but come back as `UNBUILT`: a file of 800 KB
    can nest 400,000 levels, and a Python list per level would take 100 bytes each for
    values no conversion can reach without overflowing JavaScript's stack first.
    """
    if text.startswith("\ufeff"):
        raise JSONSyntaxError("unexpected byte order mark")
    try:
        return _DECODER.decode(text)
    except RecursionError:
        return parse_json_iterative(text, build_depth)
    except ValueError as exc:  # JSONSyntaxError (NaN, Infinity) included: same message
        raise JSONSyntaxError(str(exc)) from None


_WS = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?")
_LITERALS = (("true", True), ("false", False), ("null", None))


def _fail(message: str, pos: int) -> JSONSyntaxError:
    return JSONSyntaxError(f"{message} at position {pos}")


def _scan_string(text: str, pos: int) -> tuple[str, int]:
    """The string literal whose opening quote is at `pos`, and the position after it."""
    try:
        return cast("tuple[str, int]", _scanstring(text, pos + 1, True))
    except ValueError as exc:
        raise JSONSyntaxError(str(exc)) from None


def _scan_scalar(text: str, pos: int) -> tuple[Any, int]:
    """The string, number or literal at `pos` (JSON.parse's grammar), and the position after."""
    if text.startswith('"', pos):
        return _scan_string(text, pos)
    match = _NUMBER.match(text, pos)
    if match:
        return float(match.group()), match.end()
    for literal, value in _LITERALS:
        if text.startswith(literal, pos):
            return value, pos + len(literal)
    raise _fail(f"unexpected character {text[pos]!r}", pos)


def _read_key(text: str, pos: int) -> tuple[str, int]:
    """Read `"key"` then `:`; return the key and the position of the value."""
    if text.startswith('"', pos):
        key, pos = _scan_string(text, pos)
        pos = _WS.match(text, pos).end()  # type: ignore[union-attr]
        if text.startswith(":", pos):
            return key, _WS.match(text, pos + 1).end()  # type: ignore[union-attr]
        raise _fail("expected ':'", pos)
    raise _fail("expected a property name", pos)


def parse_json_iterative(text: str, build_depth: int | None = None) -> Any:
    """The JSON.parse grammar without recursion (used for documents nested very deeply).

    Containers are attached to their parent when they close, which inserts object keys
    in source order; a repeated key keeps its first position and takes the last value,
    as in JavaScript. A container deeper than `build_depth` is checked by `_skip_value`
    and stands as `UNBUILT`.
    """
    ws = _WS.match
    end = len(text)
    pos = ws(text, 0).end()  # type: ignore[union-attr]
    # Each frame: [container, pending key (objects) or None]
    stack: list[list[Any]] = []
    while True:
        # -- read one value starting at pos (or open a container) --
        if pos >= end:
            raise _fail("unexpected end of input", pos)
        char = text[pos]
        value: Any
        if (char == "{" or char == "[") and build_depth is not None and len(stack) >= build_depth:
            pos = _skip_value(text, pos)
            value = UNBUILT
        elif char == "{" or char == "[":
            pos = ws(text, pos + 1).end()  # type: ignore[union-attr]
            closing = "}" if char == "{" else "]"
            if text.startswith(closing, pos):
                value = {} if char == "{" else []
                pos += 1
            elif char == "{":
                key, pos = _read_key(text, pos)
                stack.append([{}, key])
                continue
            else:
                stack.append([[], None])
                continue
        else:
            value, pos = _scan_scalar(text, pos)
        # -- attach the finished value, closing containers as far as possible --
        while True:
            pos = ws(text, pos).end()  # type: ignore[union-attr]
            if not stack:
                if pos != end:
                    raise _fail("unexpected data after the JSON value", pos)
                return value
            frame = stack[-1]
            container = frame[0]
            if isinstance(container, list):
                container.append(value)
                closing = "]"
            else:
                container[frame[1]] = value
                closing = "}"
            if text.startswith(",", pos):
                pos = ws(text, pos + 1).end()  # type: ignore[union-attr]
                if closing == "}":
                    frame[1], pos = _read_key(text, pos)
                break
            if text.startswith(closing, pos):
                pos += 1
                value = container
                stack.pop()
                continue
            raise _fail(f"expected ',' or '{closing}'", pos)


# possessive: a run of a million brackets keeps no backtracking state per bracket
_OPEN_ARRAYS = re.compile(r"\[(?:[ \t\n\r]*\[)*+")
_CLOSE_ARRAYS = re.compile(r"\](?:[ \t\n\r]*\])*+")


def _skip_value(text: str, pos: int) -> int:
    """Check the JSON value at `pos` (JSON.parse's grammar) without building it; return
    the position after it.

    One byte per open container (its closing bracket) is all the memory it keeps, and a
    run of brackets (`[[[[` or `]]]]`, the shape of hostile nesting) is taken in one
    regular-expression step, so a deep file costs a few C-speed scans, not a Python
    object and a loop turn per level.
    """
    ws = _WS.match
    end = len(text)
    closers = bytearray()
    while True:
        # -- one value, or the opening of containers --
        if pos >= end:
            raise _fail("unexpected end of input", pos)
        char = text[pos]
        if char == "[":
            run = _OPEN_ARRAYS.match(text, pos)
            assert run is not None
            closers += b"]" * run.group().count("[")
            pos = ws(text, run.end()).end()  # type: ignore[union-attr]
            if not text.startswith("]", pos):
                continue
            pos += 1
            del closers[-1]
        elif char == "{":
            pos = ws(text, pos + 1).end()  # type: ignore[union-attr]
            if text.startswith("}", pos):
                pos += 1
            else:
                _, pos = _read_key(text, pos)
                closers += b"}"
                continue
        else:
            _, pos = _scan_scalar(text, pos)
        # -- after a value: a comma, or close containers as far as they go --
        while True:
            pos = ws(text, pos).end()  # type: ignore[union-attr]
            if not closers:
                return pos
            closing = chr(closers[-1])
            if text.startswith(",", pos):
                pos = ws(text, pos + 1).end()  # type: ignore[union-attr]
                if closing == "}":
                    _, pos = _read_key(text, pos)
                break
            if closing == "]" and text.startswith("]", pos):
                # close at once as many arrays as the run and the open containers allow
                run = _CLOSE_ARRAYS.match(text, pos)
                assert run is not None
                count = run.group().count("]")
                innermost = closers[-count:]
                arrays = len(innermost) - len(innermost.rstrip(b"]"))
                if arrays == count:
                    pos = run.end()
                elif run.end() - pos == count:  # no whitespace inside the run
                    pos += arrays
                else:
                    for _ in range(arrays):
                        pos = text.index("]", pos) + 1
                del closers[len(closers) - arrays :]
                continue
            if text.startswith(closing, pos):
                pos += 1
                del closers[-1]
                continue
            raise _fail(f"expected ',' or '{closing}'", pos)
