"""Kill a real publication with SIGKILL at a chosen file-system step.

The parent (`PublishZygote`) starts `python -m brain_pipeline_tests.publishing.crash
--zygote` once; for every publication it forks a fresh child process. The child builds
a manifest for the bytes named in the spec, then, exactly as a pipeline run does,
calls `recover_publication` and `publish_local` on the publish root, with a tracer
installed on the `os` functions that make a publication durable (write, fsync, link,
rename/replace, unlink, mkdir, rmdir).
The tracer numbers every call; at call number `kill_at` it sends itself SIGKILL, either
before the call or, for a write, after writing half of the buffer (a torn write).

No hook exists in the publishing code for this: the tracer wraps the `os` module from
the outside, so what is killed is the code that runs in production. With `kill_at`
absent the child records the trace (the labels of every call) for the parent to plan
its kill points, and exits normally. The zygote is single-threaded, so forking it is
safe; `os.fork` is POSIX-only, like the SIGKILL this suite is about.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TRACED = ("write", "fsync", "link", "replace", "rename", "unlink", "mkdir", "rmdir")


@dataclass(frozen=True)
class ChildResult:
    """How the child ended and, for a full run, the labels of every traced call."""

    returncode: int
    trace: list[str]
    stderr: str

    @property
    def killed(self) -> bool:
        return self.returncode == -signal.SIGKILL


class PublishZygote:
    """A child process that imports the publishing core once and forks one process per
    publication: each kill costs a fork, not a Python start-up (CI time)."""

    def __init__(self) -> None:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "brain_pipeline_tests.publishing.crash", "--zygote"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )

    def run(
        self, spec: dict[str, Any], workdir: Path, kill_at: int | None = None, torn: bool = False
    ) -> ChildResult:
        """Run one publication; SIGKILL it at traced call `kill_at` (1-based)."""
        trace_file = workdir / "trace.json"
        trace_file.unlink(missing_ok=True)
        full = dict(spec, kill_at=kill_at, torn=torn, trace_file=str(trace_file))
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write(json.dumps(full) + "\n")
        self._proc.stdin.flush()
        line = self._proc.stdout.readline()
        if not line:
            err = self._proc.stderr.read() if self._proc.stderr else ""
            raise RuntimeError(f"the publishing zygote died: {err}")
        answer = json.loads(line)
        trace = json.loads(trace_file.read_text()) if trace_file.exists() else []
        return ChildResult(int(answer["returncode"]), trace, str(answer.get("error", "")))

    def close(self) -> None:
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()


# -- the child ---------------------------------------------------------------------------


def _install_tracer(
    kill_at: int | None, torn: bool, trace: list[str]
) -> dict[str, Callable[..., Any]]:
    """Wrap the traced `os` functions; return the originals (to restore them)."""

    def wrap(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def traced(*args: Any, **kwargs: Any) -> Any:
            trace.append(f"{name} {_describe(args)}")
            if kill_at is not None and len(trace) == kill_at:
                if torn and name == "write":
                    fd, data = args[0], args[1]
                    original(fd, bytes(data[: max(1, len(data) // 2)]))
                os.kill(os.getpid(), signal.SIGKILL)
            return original(*args, **kwargs)

        return traced

    originals = {name: getattr(os, name) for name in TRACED}
    for name, original in originals.items():
        setattr(os, name, wrap(name, original))
    return originals


def _describe(args: tuple[Any, ...]) -> str:
    parts = []
    for arg in args[:2]:
        if isinstance(arg, str | os.PathLike):
            parts.append(Path(arg).name)
        elif isinstance(arg, bytes | memoryview):
            parts.append(f"<{len(arg)} bytes>")
        else:
            parts.append(str(arg) if isinstance(arg, int) else type(arg).__name__)
    return " ".join(parts)


def _publish(spec: dict[str, Any]) -> None:
    """What a pipeline run does to the publish root, with the tracer installed."""
    from brain_pipeline.publishing.local import publish_local, recover_publication
    from brain_pipeline.publishing.manifest import build_manifest
    from brain_pipeline.publishing.source import ArtifactSource

    store = ArtifactSource.of_file(spec["store"])
    vectors = ArtifactSource.of_file(spec["embeddings"]) if spec.get("embeddings") else None
    manifest = build_manifest(
        store,
        vectors,
        None,
        None,
        spec.get("corpus_digest"),
        spec.get("run_id"),
        published_at=spec["published_at"],
    )
    trace: list[str] = []
    originals = _install_tracer(spec.get("kill_at"), bool(spec.get("torn")), trace)
    recover_publication(Path(spec["root"]))
    publish_local(
        store,
        vectors,
        Path(spec["root"]),
        agent_query_model=spec["agent_model"],
        manifest=manifest,
    )
    for name, original in originals.items():
        setattr(os, name, original)
    Path(spec["trace_file"]).write_text(json.dumps(trace))


def _rollback(spec: dict[str, Any]) -> None:
    """`brain-pipeline rollback`'s core on a prepared build directory, traced."""
    from brain_pipeline.config import BrainConfig
    from brain_pipeline.state.layout import StateLayout
    from brain_pipeline.steps.rollback import rollback

    class _Quiet:
        def info(self, message: str) -> None: ...

        def warning(self, message: str) -> None: ...

    cfg = BrainConfig.model_validate(spec["config"])
    trace: list[str] = []
    originals = _install_tracer(spec.get("kill_at"), bool(spec.get("torn")), trace)
    rollback(
        cfg,
        StateLayout.of(cfg.build_dir),
        to=spec.get("to"),
        run_id="crash-rollback",
        trigger="test",
        log=_Quiet(),
        upload=None,
        # The prepared publications carry no evaluation: the rollback gate counts them as
        # never judged, which only force (with a reason) lets back; crash safety is tested.
        force=True,
        reason="crash test: publications recorded without an evaluation",
    )
    for name, original in originals.items():
        setattr(os, name, original)
    Path(spec["trace_file"]).write_text(json.dumps(trace))


def _zygote() -> int:
    """Import the core, then fork one child per spec line; answer its exit status."""
    import traceback

    import brain_pipeline.publishing.local  # noqa: F401  (import once, before forking)
    import brain_pipeline.steps.rollback  # noqa: F401

    for line in sys.stdin:
        spec = json.loads(line)
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                if spec.get("action") == "rollback":
                    _rollback(spec)
                else:
                    _publish(spec)
            except BaseException:
                traceback.print_exc()
                code = 1
            sys.stderr.flush()
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        returncode = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        print(json.dumps({"returncode": returncode}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(_zygote())
