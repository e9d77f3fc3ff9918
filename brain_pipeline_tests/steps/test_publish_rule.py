"""A verdict counts only under the rule it was made with (issue 40, item 1).

A publish-only launch reads the verdicts the blocking checks recorded. Each changed
setting that can change a blocking check's outcome, and each new baseline, must make
the recorded verdict no verdict at all: the launch refuses until the check judges the
bytes again. The settings are found by walking the configuration model, so a setting
added later is covered without anyone adding it here (and one the walk cannot change
fails this test until it is taught how).
"""

from __future__ import annotations

import shutil
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

import pytest
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from brain_pipeline.config import BrainConfig
from brain_pipeline.evaluation.service import evaluate_store_dir
from brain_pipeline.publishing.local import storage_dirs
from brain_pipeline.steps.contract import StepFailure
from brain_pipeline.steps.publish import publish_to_agent
from brain_pipeline_tests.steps.built import build, configure, write_fixture
from brain_pipeline_tests.steps.conftest import TEXT, Project, StepLog
from brain_pipeline_tests.steps.handed import build_of

CHECK_SECTIONS = ("evaluation", "retrieval")
"""Whole configuration sections that shape `retrieval_eval`'s verdict."""
CHECK_SETTINGS = (("publish", "agent_string_limit"),)
"""Single settings that shape another blocking check (`fits_agent_string_limit`)."""

Leaf = tuple[tuple[str, ...], Any, FieldInfo]


def _leaves(model: type[BaseModel], prefix: tuple[str, ...]) -> Iterator[Leaf]:
    """Every setting of `model` (nested sections walked; a dict of sections is walked
    under its first allowed key)."""
    for name, info in model.model_fields.items():
        annotation = info.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            yield from _leaves(annotation, (*prefix, name))
        elif get_origin(annotation) is dict:
            key_type, value_type = get_args(annotation)
            key = get_args(key_type)[0] if get_origin(key_type) is Literal else "x"
            if isinstance(value_type, type) and issubclass(value_type, BaseModel):
                yield from _leaves(value_type, (*prefix, name, key))
            else:
                yield (*prefix, name, key), value_type, FieldInfo(annotation=value_type)
        else:
            yield (*prefix, name), annotation, info


def _settings() -> list[Leaf]:
    found = [
        leaf
        for section in CHECK_SECTIONS
        for leaf in _leaves(BrainConfig.model_fields[section].annotation, (section,))
    ]
    for path in CHECK_SETTINGS:
        model: Any = BrainConfig
        for part in path[:-1]:
            model = model.model_fields[part].annotation
        info = model.model_fields[path[-1]]
        found.append((path, info.annotation, info))
    return found


def _bounds(info: FieldInfo) -> tuple[float | None, float | None]:
    """The numeric bounds pydantic keeps in the field's metadata (`ge`/`gt`, `le`)."""
    low = high = None
    for item in info.metadata:
        for name in ("ge", "gt"):
            if getattr(item, name, None) is not None:
                low = float(getattr(item, name))
        if getattr(item, "le", None) is not None:
            high = float(item.le)
    return low, high


def _other(annotation: Any, info: FieldInfo, current: Any, root: Path) -> Any:
    """A valid value of the setting, different from `current`."""
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        options = [a for a in get_args(annotation) if a is not type(None)]
        if len(options) == 1:
            return _other(options[0], info, current, root)
    if origin is Literal:
        return next(v for v in get_args(annotation) if v != current)
    if annotation is bool:
        return not current
    if annotation in (int, float):
        low, high = _bounds(info)
        if current is None:  # unset: set it (a generous value where there is no bound)
            return annotation(high if high is not None else 10**12)
        candidate = current + 1 if high is None or current + 1 <= high else current - 1
        if annotation is float:
            candidate = (current + (high if high is not None else current + 2)) / 2
            if candidate == current:
                candidate = (current + (low or 0.0)) / 2
        return annotation(candidate)
    if annotation is Path:
        # The same fixture bytes under another name: only the setting differs.
        other = root / "elsewhere" / Path(current).name
        other.parent.mkdir(exist_ok=True)
        shutil.copyfile(current, other)
        return str(other)
    raise AssertionError(
        f"this test cannot change a setting of type {annotation!r}: teach `_other` how"
    )


def _changed(cfg: BrainConfig, path: tuple[str, ...], value: Any) -> BrainConfig:
    data = cfg.model_dump()
    node = data
    for part in path[:-1]:
        if node.get(part) is None:
            node[part] = {}
        node = node[part]
    node[path[-1]] = value
    return BrainConfig.model_validate(data)


def _current(cfg: BrainConfig, path: tuple[str, ...]) -> Any:
    node: Any = cfg.model_dump()
    for part in path:
        node = (node or {}).get(part)
    return node


def _evaluated(project: Project, log: StepLog) -> Project:
    project = configure(project)
    build(project, log)
    write_fixture(project)
    outcome = evaluate_store_dir(project.cfg, project.cfg.build_dir, run_id="eval-run")
    assert outcome.verdict.severity == "PASS", outcome.verdict.failures
    return project


def _live(project: Project) -> Path:
    return storage_dirs(project.cfg.publish_root())[0]


def _snapshot(root: Path) -> dict[str, bytes]:
    if not root.exists():
        return {}
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_the_walk_finds_the_settings_the_issue_names() -> None:
    paths = {".".join(path) for path, _, _ in _settings()}
    assert {
        "evaluation.on_regression",
        "evaluation.known_items.max_area_loss",
        "evaluation.known_items.max_found_drop",
        "evaluation.known_items.sample_per_area",
        "retrieval.mode",
        "publish.agent_string_limit",
    } <= paths


@pytest.mark.parametrize("leaf", _settings(), ids=lambda leaf: ".".join(leaf[0]))
def test_a_publish_only_launch_is_refused_once_a_check_setting_changed(
    project: Project, log: StepLog, leaf: Leaf
) -> None:
    path, annotation, info = leaf
    project = _evaluated(project, log)
    value = _other(annotation, info, _current(project.cfg, path), project.root)
    changed = _changed(project.cfg, path, value)
    assert _current(changed, path) != _current(project.cfg, path)
    before = _snapshot(project.cfg.publish_root())

    with pytest.raises(StepFailure, match="has not run on this data"):
        publish_to_agent(changed, build_of(changed), force=False, run_id="p", log=log)
    assert _snapshot(project.cfg.publish_root()) == before

    # The same bytes under the rule they were judged by still go out.
    publish_to_agent(project.cfg, build_of(project.cfg), force=False, run_id="p", log=log)
    assert (_live(project) / "knowledge-store.json").exists()


def test_a_verdict_judged_against_another_baseline_is_refused_until_judged_again(
    project: Project, log: StepLog
) -> None:
    """B is judged while nothing is published; A is published (the baselines become A's):
    B's verdict, made against no baseline, no longer counts. Republishing the live A
    (its own baselines) still works, and so does B once the check judged it again."""
    project = _evaluated(project, log)  # A, judged
    a_store = project.layout.store_file.read_bytes()
    extra = project.write("aws/extra.md", f"# Extra\n\nAnother subnet note. {TEXT}\n")
    build(project, log)  # B, judged against no baseline
    again = evaluate_store_dir(project.cfg, project.cfg.build_dir, run_id="b")
    assert again.verdict.severity == "PASS"
    extra.unlink()
    build(project, log)  # A again: its verdict (no baseline) still holds
    assert project.layout.store_file.read_bytes() == a_store
    publish_to_agent(project.cfg, build_of(project.cfg), force=False, run_id="pa", log=log)
    again = publish_to_agent(project.cfg, build_of(project.cfg), force=False, run_id="pa2", log=log)
    assert again.metadata["status"] == "unchanged"

    project.write("aws/extra.md", f"# Extra\n\nAnother subnet note. {TEXT}\n")
    build(project, log)  # B again: the same bytes, judged against another baseline
    live = _snapshot(project.cfg.publish_root())
    with pytest.raises(StepFailure, match="retrieval_eval has not run on this data"):
        publish_to_agent(project.cfg, build_of(project.cfg), force=False, run_id="pb", log=log)
    assert _snapshot(project.cfg.publish_root()) == live

    rejudged = evaluate_store_dir(project.cfg, project.cfg.build_dir, run_id="b2")
    assert rejudged.reused  # measured once: only the judgement was made again
    assert rejudged.verdict.severity == "PASS"
    result = publish_to_agent(project.cfg, build_of(project.cfg), force=False, run_id="pb", log=log)
    assert result.metadata["status"] == "updated"
