"""The schedule's job, reconstructable (for re-execution): built from the configuration
BRAIN_CONFIG names, as a code server would build it."""

from __future__ import annotations

import os

import dagster as dg

from brain_pipeline.definitions import build_definitions


def reingest_job() -> dg.JobDefinition:
    return build_definitions(os.environ["BRAIN_CONFIG"]).resolve_job_def("reingest_job")
