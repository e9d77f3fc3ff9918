"""`PLAN` is the Dagster definitions' graph, in an order a run can walk.

The plan and the decorators in `defs/` are written separately; this is what holds them
equal. An asset, observed source or check added, removed or rewired on one side only
fails here.
"""

from __future__ import annotations

from typing import Any

import dagster as dg
import pytest

from brain_pipeline.definitions import build_definitions
from brain_pipeline.steps.plan import ASSETS, CHECKS, PLAN, node


@pytest.fixture(scope="module")
def graph() -> Any:
    return build_definitions().resolve_asset_graph()


def dagster_nodes(graph: Any) -> dict[str, tuple[str, tuple[str, ...]]]:
    """name -> (kind, sorted deps) of every asset and observed source Dagster has."""
    out = {}
    for key in graph.get_all_asset_keys():
        asset = graph.get(key)
        kind = "observation" if asset.is_observable and not asset.is_materializable else "asset"
        deps = tuple(sorted(parent.to_user_string() for parent in asset.parent_keys))
        out[key.to_user_string()] = (kind, deps)
    return out


def dagster_checks(graph: Any) -> dict[str, tuple[str, tuple[str, ...], bool]]:
    """check name -> (asset it checks, sorted additional deps, blocking)."""
    out = {}
    for check_key in graph.asset_check_keys:
        spec = graph.get_check_spec(check_key)
        extra = tuple(sorted(dep.asset_key.to_user_string() for dep in spec.additional_deps))
        assert check_key.name not in out, f"two checks named {check_key.name}: PLAN cannot say"
        out[check_key.name] = (spec.asset_key.to_user_string(), extra, spec.blocking)
    return out


def plan_nodes() -> dict[str, tuple[str, tuple[str, ...]]]:
    return {n.name: (n.kind, tuple(sorted(n.deps))) for n in PLAN if n.kind != "check"}


def plan_checks() -> dict[str, tuple[str, tuple[str, ...], bool]]:
    return {
        n.name: (str(n.asset), tuple(sorted(n.deps[1:])), n.blocking)
        for n in PLAN
        if n.kind == "check"
    }


def test_the_plan_has_dagsters_assets_sources_and_their_deps(graph: Any) -> None:
    assert plan_nodes() == dagster_nodes(graph)


def test_the_plan_has_dagsters_checks_their_assets_deps_and_blocking(graph: Any) -> None:
    assert plan_checks() == dagster_checks(graph)


def test_only_checks_are_blocking_and_names_are_unique() -> None:
    names = [n.name for n in PLAN]
    assert len(names) == len(set(names))
    assert all(n.kind == "check" for n in PLAN if n.blocking)
    assert set(ASSETS) | set(CHECKS) | {"corpus", "eval_fixture"} == set(names)


def test_each_node_comes_after_everything_it_reads() -> None:
    seen: set[str] = set()
    for n in PLAN:
        assert set(n.deps) <= seen, f"{n.name} runs before {sorted(set(n.deps) - seen)}"
        seen.add(n.name)


def test_a_blocking_check_runs_before_anything_downstream_of_its_asset() -> None:
    """A run can only hold back what has not run yet: the gate must come first."""
    position = {n.name: i for i, n in enumerate(PLAN)}
    for check in (n for n in PLAN if n.blocking):
        for later in PLAN:
            if later.kind != "check" and check.asset in later.deps:
                assert position[check.name] < position[later.name], (check.name, later.name)


def test_a_check_or_asset_added_to_dagster_only_is_seen() -> None:
    """The comparison reads the real graph: one more check or asset there differs."""

    @dg.asset_check(asset="embeddings", name="made_up_check")
    def made_up_check() -> dg.AssetCheckResult:
        return dg.AssetCheckResult(passed=True)

    @dg.asset(name="made_up_asset", deps=["embeddings"])
    def made_up_asset() -> None:
        return None

    extra = dg.Definitions(assets=[made_up_asset], asset_checks=[made_up_check])
    graph = dg.Definitions.merge(build_definitions(), extra).resolve_asset_graph()
    assert plan_checks() != dagster_checks(graph)
    assert set(dagster_checks(graph)) - set(plan_checks()) == {"made_up_check"}
    assert set(dagster_nodes(graph)) - set(plan_nodes()) == {"made_up_asset"}


def test_node_lookup_and_a_checks_asset() -> None:
    assert node("retrieval_eval").asset == "embeddings"
    assert node("embeddings").asset is None
