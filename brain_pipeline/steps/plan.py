"""The asset graph as plain data: every step and check, in the order a run makes them.

The Dagster layer declares the same graph with decorators (`defs/`); a run made
without Dagster (`steps.direct_run`) walks this list instead. One is not derived from
the other (the decorators carry Dagster-only settings), so `test_plan.py` holds them
equal: the same nodes, dependencies and blocking checks, and an order that respects
every dependency. A node added on one side only fails that test.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

NodeKind = Literal["observation", "asset", "check"]


@dataclass(frozen=True)
class Node:
    name: str
    kind: NodeKind
    deps: tuple[str, ...] = ()
    """Assets (or observed sources) this node reads; a check's includes its asset."""
    blocking: bool = False
    """A check whose ERROR stops everything downstream of its asset."""

    @property
    def asset(self) -> str | None:
        """The asset a check checks (its first dependency)."""
        return self.deps[0] if self.kind == "check" else None


PLAN: tuple[Node, ...] = (
    Node("corpus", "observation"),
    Node("eval_fixture", "observation"),
    Node("knowledge_chunks", "asset", ("corpus",)),
    Node("corpus_problems", "check", ("knowledge_chunks",)),
    Node("knowledge_store", "asset", ("knowledge_chunks",)),
    Node("no_empty_area", "check", ("knowledge_store",)),
    Node("fits_agent_string_limit", "check", ("knowledge_store",), blocking=True),
    Node("embeddings", "asset", ("knowledge_store",)),
    Node("retrieval_eval", "check", ("embeddings", "eval_fixture"), blocking=True),
    Node("embedding_coverage", "check", ("embeddings",)),
    Node("embedding_gaps", "check", ("embeddings",)),
    Node("published_local", "asset", ("embeddings",)),
    Node("vectors_reach_agent", "check", ("published_local",)),
    Node("published_store_is_current", "check", ("published_local", "corpus")),
    Node("published_s3", "asset", ("published_local",)),
)


def node(name: str) -> Node:
    return next(n for n in PLAN if n.name == name)


ASSETS = tuple(n.name for n in PLAN if n.kind == "asset")
CHECKS = tuple(n.name for n in PLAN if n.kind == "check")
