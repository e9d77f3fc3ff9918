"""The rule a retrieval verdict was made under, and whether it is still today's rule.

A verdict judges measurements (a report, keyed by `eval_record.EvalInputs`: store,
vectors, fixture, thresholds, provider, model, code) under a rule: every setting of the
sections in `RULE_SECTIONS` (`evaluation.on_regression`, `evaluation.known_items.*`,
`retrieval.mode`, ... and any added later: the sections are digested whole, so nobody has
to remember to add a new one), the regression baseline and the known-item baseline it
compared with, and the judging code. Measuring is costly and does not depend on the rule,
so a report is reused across rules; a verdict is not. The evaluation record keeps the
rule next to the verdict, and the publish gate counts a verdict only when `holds` says it
was made under today's rule. Without that, a verdict made under `on_regression: warn`, a
looser `max_area_loss` or another baseline opened the gate of a later publish-only launch
that today's rule would refuse.

One case keeps the ordinary flow working: once an evaluation is published (or accepted)
its own evaluation and known items *are* the baselines. Judged against itself an
evaluation finds no regression and no lost known item, so its stored verdict, made
against the earlier baseline, is at least as strict as a re-judgement would be, and it
still counts (the S3 step after `published_local` in the same run; a publish-only launch
of the live build). Its settings and code must still be today's.

Pure: reads the two baselines from the ledger (`evaluation.judgements`), no Dagster.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from brain_pipeline.config import BrainConfig
from brain_pipeline.evaluation.eval_record import judging_code
from brain_pipeline.state.memory import Memory
from brain_pipeline.utils.digest import value_digest

RULE_SECTIONS: tuple[str, ...] = ("evaluation", "retrieval")
"""The configuration sections whose every setting can change the verdict: the evaluation
(thresholds, regression and known-item rules, fixture) and the retrieval mode (which
retriever the known items are asked with)."""


@dataclass(frozen=True)
class VerdictRule:
    """What a verdict was judged by, besides the measured inputs (digests only)."""

    settings: str
    """Digest of every setting in `RULE_SECTIONS`."""
    baseline: str | None
    """The evaluation key of the regression baseline compared with (None: none)."""
    known_items_candidate: str | None
    """The evaluation whose known items the known-item baseline is (its key; None: no
    baseline)."""
    known_items_digest: str | None
    """Digest of the known-item baseline's items and chunk counts (None: no baseline)."""
    code: str = field(default_factory=judging_code)

    def key(self) -> str:
        """One digest of the whole rule (shown next to the verdict)."""
        return value_digest(asdict(self))

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "key": self.key()}

    @classmethod
    def from_dict(cls, data: Any) -> VerdictRule | None:
        """The stored rule; None when there is none (a record from before rules were
        kept) or it cannot be read: such a verdict counts under no rule."""
        if not isinstance(data, Mapping):
            return None
        try:
            return cls(**{f.name: data[f.name] for f in fields(cls)})
        except (KeyError, TypeError):
            return None


def rule_of(
    cfg: BrainConfig,
    baseline_key: str | None,
    known_items_candidate: str | None,
    known_items_digest: str | None,
) -> VerdictRule:
    """The rule of a verdict judged now with `cfg` against these baselines (its settings:
    every one in `RULE_SECTIONS`, digested whole)."""
    sections = {name: getattr(cfg, name).model_dump(mode="json") for name in RULE_SECTIONS}
    return VerdictRule(
        value_digest(sections), baseline_key or None, known_items_candidate, known_items_digest
    )


def current_rule(cfg: BrainConfig, memory: Memory) -> VerdictRule:
    """The rule a verdict would be judged by now: today's settings, and the baselines
    the ledger of `memory` keeps (read as the evaluation reads them)."""
    from brain_pipeline.evaluation.baseline import load_baseline, load_known_items

    regression = load_baseline(memory).baseline
    loaded = load_known_items(memory)
    known = None if isinstance(loaded, str) else loaded
    return rule_of(
        cfg,
        regression.key if regression is not None else None,
        known.candidate if known is not None else None,
        known.digest if known is not None else None,
    )


def holds(record: Mapping[str, Any] | None, current: VerdictRule) -> bool:
    """Whether the verdict in the evaluation `record` was made under `current`, or under
    today's settings and code against an earlier baseline while the baselines are now
    this evaluation's own (see the module docstring)."""
    if record is None:
        return False
    stored = VerdictRule.from_dict(record.get("rule"))
    if stored is None:
        return False
    if (stored.settings, stored.code) != (current.settings, current.code):
        return False
    return stored == current or _against_itself(record, current)


def _against_itself(record: Mapping[str, Any], current: VerdictRule) -> bool:
    """The baselines are the ones publishing (or accepting) `record` made."""
    own_key = record.get("key")
    own_candidate = record.get("known_items_candidate")
    if not isinstance(own_key, str) or current.baseline != own_key:
        return False
    return current.known_items_candidate in (own_candidate, None)


def lookup_judged(cfg: BrainConfig, memory: Memory, key: str) -> dict[str, Any] | None:
    """The evaluation record of the inputs `key` when its verdict holds under today's
    rule (`holds`), else None: for a publish gate, a verdict made under another rule is
    no verdict on these bytes, and the check must judge them again."""
    from brain_pipeline.evaluation import eval_record

    record = eval_record.lookup(memory, key)
    return record if holds(record, current_rule(cfg, memory)) else None
