"""The hand-off between assets: Dagster's IO manager over the ledger and the blobs.

An asset returns the small typed reference it kept (its `AssetRecord`, the ledger row
naming its outputs by sha256); a downstream asset receives its upstream's reference as
a parameter. Loading one is reading the upstream's current record from the ledger and
bringing its files onto this disk from the blobs when they are missing, so a step in an
empty folder (a process per step, a pod, a fresh worker) reads exactly the recorded
bytes, and no step opens another's file by path. `embeddings` (and `published_local`,
whose upload goes on to S3) hand on the whole build the checks and publish steps read:
the store's and the vectors' records together (`steps.contract.Build`).

Storing is already done when the hand-off sees a reference: the step kept its record
in the ledger as its last act (`steps.contract.record_step`), after checking that its
input had not moved, so `handle_output` keeps nothing twice.

The hand-off takes the run's `BrainSettings` (the configuration snapshot the run read
when it started) as a required resource, not as a nested resource field: Dagster
initialises nested resources through a deprecated accessor. Loading an input is the
step's first act, so before a load that can refuse (an upstream never materialised) it
does what every step does first (`lib.steps.start_step`: the preflight, the instance's
ledger), and a run that cannot work refuses with the same one line. Loading the build
never refuses (a record may be absent) and runs no preflight: a rollback, which is the
publish assets' own step too, needs neither a corpus nor a build, and the check and the
publish steps run the preflight themselves before they judge it.
"""

from __future__ import annotations

from typing import Any

import dagster as dg

from brain_pipeline.config import memory_of
from brain_pipeline.lib.steps import start_step, step_failures
from brain_pipeline.state.records import AssetRecord
from brain_pipeline.steps.contract import Build, load_build, upstream_record

RECORD_TYPE = dg.PythonObjectDagsterType(AssetRecord, name="AssetRecord")
"""What a building asset returns: its record (the asset's output type; without it the
output of an asset returning a `MaterializeResult` is typed as holding nothing)."""

BUILD_HANDED_ON = frozenset({"embeddings", "published_local"})
"""The assets whose downstream reads the whole build (store and vectors), not one record."""


class LedgerHandOff(dg.IOManager):
    """Hands each asset's record on to the next asset (see the module docstring)."""

    def __init__(
        self, settings: Any, instance: dg.DagsterInstance | None, run: dg.DagsterRun | None
    ) -> None:
        self._settings = settings
        self._instance = instance
        self._run = run

    def handle_output(self, context: dg.OutputContext, obj: AssetRecord | None) -> None:
        """Nothing to keep: the step kept its record in the ledger before returning it."""

    def load_input(self, context: dg.InputContext) -> AssetRecord | Build:
        """The upstream's current record (or the build), its files on this disk."""
        asset = context.asset_key.to_user_string()
        if asset in BUILD_HANDED_ON:  # never refuses: the step itself judges the build
            return load_build(memory_of(self._settings.load()))
        if self._instance is not None:
            cfg = start_step(self._instance, self._settings, self._run)
        else:
            cfg = self._settings.load()
        with step_failures():
            return upstream_record(memory_of(cfg), asset, context.op_def.name)


@dg.io_manager(required_resource_keys={"settings"})
def ledger_hand_off(init_context: dg.InitResourceContext) -> LedgerHandOff:
    """The IO manager every asset uses (resource key `io_manager`)."""
    return LedgerHandOff(init_context.resources.settings, init_context.instance, init_context.run)
