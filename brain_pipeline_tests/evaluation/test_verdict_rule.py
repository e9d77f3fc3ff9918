"""The rule a verdict was made under: which baselines and settings it is keyed by, and
when a stored verdict still holds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from brain_pipeline.config import BrainConfig
from brain_pipeline.evaluation.baseline import record_baseline, save_candidate
from brain_pipeline.evaluation.known_items import KnownItem
from brain_pipeline.evaluation.verdict_rule import VerdictRule, current_rule, holds
from brain_pipeline_tests.evaluation.helpers import memory_at

ITEM = KnownItem("aws", "0123456789ab", "vpc peering", "aws/vpc.md", "VPC", "text", 1,
                 ("0123456789ab",))


def _cfg(tmp_path: Path, **evaluation: object) -> BrainConfig:
    return BrainConfig.model_validate(
        {"build_dir": tmp_path / "build", "evaluation": evaluation}
    )


def _known_baseline(layout: Any, key: str, chunks: int) -> str:
    """Publish the evaluation `key` with the known items it kept (under its key)."""
    save_candidate(layout, key, [ITEM], {"aws": chunks}, [])
    record_baseline(layout, {"key": key, "known_items_candidate": key}, {}, kind="published")
    return key


def test_a_record_without_a_rule_holds_under_none(tmp_path: Path) -> None:
    """Written before verdicts kept their rule: the check must judge the bytes again."""
    rule = current_rule(_cfg(tmp_path), memory_at(tmp_path / "build"))
    assert not holds({"key": "k", "verdict": {"severity": "PASS"}}, rule)
    assert not holds({"key": "k", "rule": {"settings": "x"}}, rule)
    assert holds({"key": "k", "rule": rule.to_dict()}, rule)


def test_the_known_item_baseline_s_content_is_part_of_the_rule(tmp_path: Path) -> None:
    layout = memory_at(tmp_path / "build")
    cfg = _cfg(tmp_path)
    _known_baseline(layout, "eval-a", 7)
    before = current_rule(cfg, layout)
    record = {"key": "k", "rule": before.to_dict()}
    assert holds(record, before)

    _known_baseline(layout, "eval-a", 9)  # the same candidate, other chunk counts
    after = current_rule(cfg, layout)
    assert after.known_items_candidate == before.known_items_candidate
    assert after.known_items_digest != before.known_items_digest
    assert not holds(record, after)


def test_a_verdict_counts_against_its_own_baselines_but_not_under_other_settings(
    tmp_path: Path,
) -> None:
    """Published, an evaluation's own record and known items are the baselines: its
    verdict (judged against the earlier ones) still counts, under the same settings."""
    layout = memory_at(tmp_path / "build")
    cfg = _cfg(tmp_path)
    judged = current_rule(cfg, layout)  # nothing published yet: no baselines
    assert (judged.baseline, judged.known_items_candidate) == (None, None)
    own = _known_baseline(layout, "record-b", 7)
    record = {"key": "record-b", "known_items_candidate": own, "rule": judged.to_dict()}
    published = VerdictRule(
        judged.settings, "record-b", own, current_rule(cfg, layout).known_items_digest
    )
    assert holds(record, published)
    assert not holds(record, VerdictRule(judged.settings, "record-a", own, "d"))
    assert not holds(record, VerdictRule(judged.settings, "record-b", "other", "d"))
    looser = current_rule(_cfg(tmp_path, on_regression="warn"), layout)
    assert not holds(record, VerdictRule(looser.settings, "record-b", own, "d"))
