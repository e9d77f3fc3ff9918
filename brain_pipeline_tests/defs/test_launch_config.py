"""A launch cannot move a request or a key: the Launchpad (any `run_config`) can set every
resource field, so a run whose resource config points the Gemini client at another host,
reads another variable as its key, or moves the S3 endpoint is refused before any request
leaves, with one line naming the field and never its value."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import boto3
import dagster as dg
import pytest

from brain_pipeline.definitions import build_definitions
from brain_pipeline_tests.defs.conftest import Project
from brain_pipeline_tests.peers.fake_gemini import FakeGemini

API_KEY = "launch-test-gemini-key-51c2"
OTHER_SECRET = "aws-secret-never-sent-0f9e3d"


class CaptureServer:
    """A loopback HTTP server that answers 200 to anything and counts what reached it."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _capture(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                self.rfile.read(length)
                server.requests.append((self.command, self.path, dict(self.headers)))
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            do_GET = do_POST = do_PUT = do_HEAD = _capture

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def __enter__(self) -> CaptureServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


@pytest.fixture
def capture() -> Iterator[CaptureServer]:
    with CaptureServer() as server:
        yield server


@pytest.fixture
def gemini(tiny_project: Project, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGemini]:
    """The project embedding with Gemini through the location's own endpoint and key."""
    with FakeGemini(api_key=API_KEY) as server:
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", server.url)
        monkeypatch.setenv("GEMINI_API_KEY", API_KEY)
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", OTHER_SECRET)
        tiny_project.write_config(**{"embedding.provider": "gemini", "embedding.dimension": 32})
        yield server


def _launch(project: Project, resources: dict[str, Any]) -> dg.ExecuteInProcessResult:
    """Launch the real definitions' asset job with `resources` as the run's resource
    config, as the Launchpad sends it: its scaffold states every field the location
    loaded (a resource's launch config replaces all of its fields), then the overrides."""
    definitions = build_definitions(str(project.config_path))
    loaded = definitions.resources or {}
    run_config: dict[str, Any] = {}
    for key, overrides in resources.items():
        resource = loaded[key]
        fields = {
            name: ({"env": value.env_var_name} if isinstance(value, dg.EnvVar) else value)
            for name in type(resource).model_fields
            if (value := getattr(resource, name)) is not None
            and not isinstance(value, dg.ConfigurableResource)
        }
        run_config[key] = {"config": {**fields, **overrides}}
    job = definitions.resolve_implicit_global_asset_job_def()
    return job.execute_in_process(
        run_config={"resources": run_config},
        instance=project.instance,
        raise_on_error=False,
    )


def _failures(result: dg.ExecuteInProcessResult) -> list[str]:
    """What each failed step says (a `dg.Failure`'s description, else the error), and what
    a resource that refused to start said (the settings resource refuses before any step)."""
    said = []
    for event in result.all_events:
        if event.event_type_value == "RESOURCE_INIT_FAILURE":
            error = event.event_specific_data.error  # type: ignore[union-attr]
            said.append(error.message.strip().splitlines()[-1] if error else "")
        if event.is_step_failure:
            data = event.step_failure_data
            user = data.user_failure_data
            error = data.error.message if data.error else ""
            said.append(user.description if user and user.description else error)
    return said


def test_a_launch_redirecting_the_endpoint_and_the_key_is_refused_and_sends_nothing(
    tiny_project: Project, gemini: FakeGemini, capture: CaptureServer
) -> None:
    result = _launch(
        tiny_project,
        {"embedding_client": {"base_url": capture.url,
                              "api_key": {"env": "AWS_SECRET_ACCESS_KEY"}}},
    )
    assert not result.success
    assert capture.requests == []
    assert gemini.stats().requests == 0
    (said,) = _failures(result)
    assert "\n" not in said
    assert "embedding_client.api_key" in said and "embedding_client.base_url" in said
    assert "edit corpus_config.yaml" in said and "reload the code location" in said
    for value in (OTHER_SECRET, API_KEY, capture.url, gemini.url):
        assert value not in said
    assert not (tiny_project.published() / "knowledge-store.json").exists()


def test_a_launch_reading_another_variable_as_the_key_is_refused(
    tiny_project: Project, gemini: FakeGemini
) -> None:
    key_from_aws = {"api_key": {"env": "AWS_SECRET_ACCESS_KEY"}}
    result = _launch(tiny_project, {"embedding_client": key_from_aws})
    assert not result.success
    assert gemini.stats().requests == 0  # the location's own endpoint never saw that key
    (said,) = _failures(result)
    assert said.startswith("refused before any request: embedding_client.api_key is not")
    assert OTHER_SECRET not in said


def test_a_launch_moving_only_the_endpoint_with_the_real_key_is_refused(
    tiny_project: Project, gemini: FakeGemini, capture: CaptureServer
) -> None:
    """The base_url rule on its own: the key is the location's, so only the endpoint
    comparison can refuse (with both moved, the key check would refuse first)."""
    result = _launch(
        tiny_project,
        {"embedding_client": {"base_url": capture.url, "api_key": {"env": "GEMINI_API_KEY"}}},
    )
    assert not result.success
    assert capture.requests == []  # the real key never reached the launch's host
    assert gemini.stats().requests == 0
    (said,) = _failures(result)
    assert said.startswith("refused before any request: embedding_client.base_url is not")
    for value in (API_KEY, capture.url, gemini.url):
        assert value not in said


def test_a_launch_restating_what_the_location_loaded_runs(
    tiny_project: Project, gemini: FakeGemini
) -> None:
    """The check compares values, not the mere presence of launch config: the same
    endpoint and key variable, stated at launch, embed as usual."""
    result = _launch(
        tiny_project,
        {"embedding_client": {"base_url": gemini.url, "api_key": {"env": "GEMINI_API_KEY"}}},
    )
    assert result.success, _failures(result)
    assert gemini.stats().requests > 0


def test_the_capture_server_sees_a_client_the_location_itself_points_at_it(
    tiny_project: Project, gemini: FakeGemini, capture: CaptureServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The zero-request assertions above can fail: a location loaded with the capture
    server as its endpoint does send it the key (and gets no vectors back)."""
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", capture.url)
    result = _launch(tiny_project, {})
    assert not result.success
    assert capture.requests
    assert all(headers.get("x-goog-api-key") == API_KEY for _, _, headers in capture.requests)


def test_a_launch_moving_the_s3_endpoint_is_refused_and_uploads_nothing(
    tiny_project: Project, s3: Any, capture: CaptureServer
) -> None:
    boto3.client("s3").create_bucket(Bucket="launch-bucket")
    tiny_project.write_config(**{"publish.s3": {"bucket": "launch-bucket", "prefix": "kb/"}})
    result = _launch(tiny_project, {"s3_publisher": {"endpoint_url": capture.url}})
    assert not result.success
    assert capture.requests == []
    listed = boto3.client("s3").list_objects_v2(Bucket="launch-bucket")
    assert listed.get("KeyCount", 0) == 0
    (said,) = _failures(result)
    assert said.startswith("refused before any request: s3_publisher.endpoint_url is not")
    assert capture.url not in said


def test_a_launch_moving_only_the_bucket_is_refused_and_uploads_nothing(
    tiny_project: Project, s3: Any
) -> None:
    """The bucket rule on its own: same endpoint, region and prefix, another bucket (one
    that exists and accepts writes, so only the comparison can stop the upload)."""
    client = boto3.client("s3")
    for bucket in ("launch-bucket", "elsewhere-bucket"):
        client.create_bucket(Bucket=bucket)
    tiny_project.write_config(**{"publish.s3": {"bucket": "launch-bucket", "prefix": "kb/"}})
    result = _launch(tiny_project, {"s3_publisher": {"bucket": "elsewhere-bucket"}})
    assert not result.success
    for bucket in ("launch-bucket", "elsewhere-bucket"):
        assert client.list_objects_v2(Bucket=bucket).get("KeyCount", 0) == 0
    (said,) = _failures(result)
    assert said.startswith(
        "refused before any request: s3_publisher.bucket: 'elsewhere-bucket' -> "
        "'launch-bucket' is not what the code location loaded"
    )


def test_a_launch_pointing_the_run_at_another_configuration_file_is_refused(
    tiny_project: Project, tmp_path: Any
) -> None:
    other = tmp_path / "other.yaml"
    other.write_bytes(tiny_project.config_path.read_bytes())
    result = _launch(tiny_project, {"settings": {"config_path": str(other)}})
    assert not result.success
    said = _failures(result)
    assert said, "nothing refused the run"
    for line in said:
        assert "settings.config_path is not the configuration the code location loaded" in line
        assert str(other) not in line
