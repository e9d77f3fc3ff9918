"""The one Definitions object: what the UI, the schedule and the CLI all load."""

from __future__ import annotations

import tomllib
from pathlib import Path

import dagster as dg
import pytest
import yaml

from brain_pipeline.definitions import build_definitions

REPO = Path(__file__).resolve().parents[2]
EXPECTED_GROUPS = {
    "corpus": "ingest",
    "eval_fixture": "ingest",
    "knowledge_chunks": "ingest",
    "knowledge_store": "ingest",
    "embeddings": "embed",
    "published_local": "publish",
    "published_s3": "publish",
}
SOURCES = {"corpus", "eval_fixture"}
defs = build_definitions()


def test_every_asset_has_its_group_kinds_and_description() -> None:
    graph = defs.resolve_asset_graph()
    keys = {key.to_user_string() for key in graph.get_all_asset_keys()}
    assert keys == set(EXPECTED_GROUPS)
    for name, group in EXPECTED_GROUPS.items():
        node = graph.get(dg.AssetKey(name))
        assert node.group_name == group
        assert node.description and len(node.description) > 40
        if name not in SOURCES:
            assert any(tag.startswith("dagster/kind/") for tag in node.tags), name
    assert "dagster/kind/s3" in graph.get(dg.AssetKey("published_s3")).tags


@pytest.mark.parametrize(("provider", "kind"), [("gemini", "gemini"), ("local", "onnx")])
def test_the_embeddings_kind_follows_the_configured_provider(
    tmp_path: Path, provider: str, kind: str
) -> None:
    config = tmp_path / "corpus_config.yaml"
    config.write_text(f"embedding:\n  provider: {provider}\n", encoding="utf-8")
    graph = build_definitions(str(config)).resolve_asset_graph()
    tags = graph.get(dg.AssetKey("embeddings")).tags
    assert f"dagster/kind/{kind}" in tags
    other = {"gemini": "onnx", "onnx": "gemini"}[kind]
    assert f"dagster/kind/{other}" not in tags


def test_retrieval_eval_is_a_blocking_check_upstream_of_all_publishing() -> None:
    graph = defs.resolve_asset_graph()
    check_key = dg.AssetCheckKey(dg.AssetKey("embeddings"), "retrieval_eval")
    assert check_key in graph.asset_check_keys
    spec = graph.get_check_spec(check_key)
    assert spec.blocking is True
    for name in ("published_local", "published_s3"):
        upstream = graph.get(dg.AssetKey(name)).parent_keys
        ancestors = set(upstream)
        frontier = list(upstream)
        while frontier:
            parents = graph.get(frontier.pop()).parent_keys
            frontier.extend(parents - ancestors)
            ancestors |= parents
        assert dg.AssetKey("embeddings") in ancestors, name


def test_reingest_job_selects_every_asset() -> None:
    job = defs.resolve_job_def("reingest_job")
    graph = defs.resolve_asset_graph()
    assert job.asset_layer.selected_asset_keys == set(graph.get_all_asset_keys())


def test_schedule_follows_the_configuration(tmp_path: Path) -> None:
    config = tmp_path / "corpus_config.yaml"
    config.write_text(
        yaml.safe_dump(
            {"schedule": {"cron": "15 4 * * 1", "timezone": "Europe/Paris", "enabled": False}}
        )
    )
    custom = build_definitions(str(config))
    schedule = custom.resolve_schedule_def("reingest_schedule")
    assert schedule.cron_schedule == "15 4 * * 1"
    assert schedule.execution_timezone == "Europe/Paris"
    assert schedule.default_status == dg.DefaultScheduleStatus.STOPPED
    assert schedule.job_name == "reingest_job"
    default = defs.resolve_schedule_def("reingest_schedule")
    assert default.cron_schedule == "0 3 * * *"
    assert default.default_status == dg.DefaultScheduleStatus.RUNNING


def test_the_publication_has_a_freshness_policy_from_the_schedule(tmp_path: Path) -> None:
    """A weekly schedule gives the live publication a week (plus the margin) before the
    freshness daemon calls it stale; the nightly default, a day."""

    def window(definitions: dg.Definitions) -> tuple[float, float]:
        spec = definitions.resolve_assets_def("published_local").specs_by_key[
            dg.AssetKey("published_local")
        ]
        policy = spec.freshness_policy
        assert policy is not None
        warn = getattr(policy, "warn_window", None)
        return (
            policy.fail_window.to_timedelta().total_seconds(),  # type: ignore[attr-defined]
            warn.to_timedelta().total_seconds() if warn is not None else 0.0,
        )

    config = tmp_path / "corpus_config.yaml"
    config.write_text(yaml.safe_dump({"schedule": {"cron": "15 4 * * 1", "enabled": False}}))
    weekly = build_definitions(str(config))
    hour = 3600.0
    assert window(weekly) == (7 * 24 * hour + 2 * hour, 7 * 24 * hour)
    assert window(defs) == (26 * hour, 24 * hour)


def test_workspace_and_dg_point_at_the_same_module() -> None:
    workspace = yaml.safe_load((REPO / "workspace.yaml").read_text())
    module = workspace["load_from"][0]["python_module"]["module_name"]
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert project["tool"]["dg"]["project"]["code_location_target_module"] == module
    assert module == "brain_pipeline.definitions"


def test_the_code_location_is_a_definitions_function() -> None:
    """`dg` and workspace.yaml load a `@dg.definitions` function, built only when called."""
    from brain_pipeline import definitions

    loaded = dg.Definitions.merge(definitions.defs())  # type: ignore[operator]
    assert {k.to_user_string() for k in loaded.resolve_asset_graph().get_all_asset_keys()} == set(
        EXPECTED_GROUPS
    )


def test_in_process_executor_by_default() -> None:
    job = defs.resolve_implicit_global_asset_job_def()
    assert job.executor_def.name == "in_process"


def test_the_gemini_key_is_an_env_var_and_the_clients_show_their_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", "sekret-key-for-the-resource-test")
    resources = build_definitions().resources or {}
    embedding = resources["embedding_client"]
    # The settings that decide the vectors' bytes and where uploads go are real fields,
    # read from the configuration (defs/test_resources.py: a run that disagrees refuses).
    shown = ("provider", "model", "dimension", "too_long")
    assert {name: getattr(embedding, name) for name in shown} == {
        "provider": "gemini",
        "model": "gemini-embedding-001",
        "dimension": 256,
        "too_long": "truncate",
    }
    assert resources["s3_publisher"].bucket is None  # type: ignore[attr-defined]
    # The key is named, never held: Dagster resolves it in the run's own process.
    assert isinstance(embedding.api_key, dg.EnvVar)  # type: ignore[attr-defined]
    assert embedding.api_key.env_var_name == "GEMINI_API_KEY"  # type: ignore[attr-defined]
    assert "sekret" not in repr(embedding) and "sekret" not in repr(resources["settings"])


def test_without_a_key_the_embedding_client_names_none() -> None:
    resources = build_definitions().resources or {}
    assert resources["embedding_client"].api_key is None  # type: ignore[attr-defined]
