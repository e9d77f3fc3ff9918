"""`state.check_verdicts`: a blocking check's verdict is found only under the key of
exactly what it judged, survives a damaged file as "no verdict", and keeps a few."""

from __future__ import annotations

from pathlib import Path

from brain_pipeline.state.check_verdicts import KEEP, CheckRecord, record_verdict, verdict_for
from brain_pipeline.state.layout import StateLayout

FITS = "fits_agent_string_limit"


def _record(key: str, severity: str = "PASS") -> CheckRecord:
    return CheckRecord(check=FITS, key=key, severity=severity, description=f"judged {key}")


def test_a_verdict_is_found_under_its_key_only(tmp_path: Path) -> None:
    layout = StateLayout.of(tmp_path)
    record_verdict(layout, _record("store-a"))
    found = verdict_for(layout, FITS, "store-a")
    assert found is not None and found.severity == "PASS" and found.when
    assert verdict_for(layout, FITS, "store-b") is None
    assert verdict_for(layout, "another_check", "store-a") is None


def test_a_new_verdict_on_the_same_data_replaces_the_old(tmp_path: Path) -> None:
    layout = StateLayout.of(tmp_path)
    record_verdict(layout, _record("store-a"))
    record_verdict(layout, _record("store-a", "ERROR"))
    found = verdict_for(layout, FITS, "store-a")
    assert found is not None and found.blocks


def test_the_newest_verdicts_are_kept(tmp_path: Path) -> None:
    layout = StateLayout.of(tmp_path)
    for i in range(KEEP + 2):
        record_verdict(layout, _record(f"store-{i}"))
    assert verdict_for(layout, FITS, "store-0") is None
    assert verdict_for(layout, FITS, f"store-{KEEP + 1}") is not None
    assert verdict_for(layout, FITS, "store-2") is not None


def test_a_damaged_file_is_no_verdict_and_is_set_aside(tmp_path: Path) -> None:
    layout = StateLayout.of(tmp_path)
    record_verdict(layout, _record("store-a"))
    layout.check_verdicts.write_bytes(b"{not json")
    assert verdict_for(layout, FITS, "store-a") is None
    record_verdict(layout, _record("store-a"))
    assert verdict_for(layout, FITS, "store-a") is not None
