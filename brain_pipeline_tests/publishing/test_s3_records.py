"""The strict reader of an uploaded manifest's `objects` section: well-typed entries, or
one ValueError line naming the bad field (never a TypeError, never a raw control byte)."""

from __future__ import annotations

import json

import pytest

from brain_pipeline.publishing.s3 import RemoteEntry, remote_objects

SHA = "ab" * 32


def test_a_well_formed_section_is_read_as_entries() -> None:
    raw = json.dumps(
        {"objects": {"knowledge-store.json": {"key": "p/objects/x", "sha256": SHA, "size": 7}}}
    )
    assert remote_objects(raw) == {"knowledge-store.json": RemoteEntry("p/objects/x", SHA, 7)}


def test_a_manifest_from_before_the_section_has_no_objects() -> None:
    assert remote_objects(b'{"version": 1}') == {}


@pytest.mark.parametrize(
    ("document", "named"),
    [
        ("not json", "not JSON"),
        ("[1, 2]", "not a JSON object"),
        ('{"objects": []}', "objects is not an object"),
        ('{"objects": {"knowledge-store.json": "oops"}}', 'objects."knowledge-store.json" is'),
        (
            json.dumps({"objects": {"s": {"key": "k", "sha256": "short", "size": 1}}}),
            'objects."s".sha256',
        ),
        (
            json.dumps({"objects": {"s": {"key": "k", "sha256": SHA, "size": True}}}),
            'objects."s".size',
        ),
        (
            json.dumps({"objects": {"s": {"key": "a\x1b]0;x\x07", "sha256": SHA, "size": 1}}}),
            'objects."s".key',
        ),
        (
            json.dumps({"objects": {"\x1b[2K": {"key": "k", "sha256": SHA, "size": 1}}}),
            "control characters",
        ),
    ],
)
def test_a_malformed_section_is_one_line_naming_the_field(document: str, named: str) -> None:
    with pytest.raises(ValueError) as raised:
        remote_objects(document)
    said = str(raised.value)
    assert named in said
    assert "\n" not in said and "\x1b" not in said and "\x07" not in said
