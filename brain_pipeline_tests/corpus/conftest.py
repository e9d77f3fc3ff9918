"""Fixtures for the corpus tests: Node.js as the oracle, and corpus builders."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
REFERENCE_SCRIPT = HERE / "reference_ingest.mjs"


def node_binary() -> str:
    found = shutil.which("node")
    if found is None:  # the oracle is part of the test environment, not optional
        raise RuntimeError("Node.js (`node`) is required by the corpus tests")
    return found


def run_node(script: str, payload: Any) -> Any:
    """Run `script` with `input` bound to the JSON payload; return what it prints as JSON.

    The payload is sent ASCII-escaped so lone surrogates survive the trip into Node.
    """
    program = (
        "let data='';process.stdin.setEncoding('utf8');"
        "process.stdin.on('data',c=>data+=c);process.stdin.on('end',()=>{"
        "const input=JSON.parse(data);"
        f"const result=(()=>{{{script}}})();"
        "process.stdout.write(JSON.stringify(result));});"
    )
    done = subprocess.run(
        [node_binary(), "-e", program],
        input=json.dumps(payload, ensure_ascii=True).encode("ascii"),
        capture_output=True,
        check=True,
        timeout=60,
    )
    return json.loads(done.stdout.decode("utf-8"))


def run_reference(corpus: Path, out: Path) -> bytes:
    """The JavaScript reference ingest's store bytes for `corpus`."""
    subprocess.run(
        [node_binary(), str(REFERENCE_SCRIPT), str(corpus), str(out)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return out.read_bytes()


@pytest.fixture
def node() -> Callable[[str, Any], Any]:
    return run_node


@pytest.fixture
def reference(tmp_path: Path) -> Callable[[Path], bytes]:
    return lambda corpus: run_reference(corpus, tmp_path / "reference-store.json")


Writer = Callable[[str, "str | bytes"], Path]


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    root = tmp_path / "corpus"
    root.mkdir()
    return root


@pytest.fixture
def write(corpus: Path) -> Writer:
    """write("area/dir/file.md", text or bytes) -> the file's path (parents created)."""

    def _write(relative: str, content: str | bytes) -> Path:
        path = corpus / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, str):
            content = content.encode("utf-8")
        path.write_bytes(content)
        return path

    return _write


def symlink(link: Path, target: str | os.PathLike[str]) -> Path:
    link.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target, link)
    return link
