"""Retrieval evaluation: the labelled fixture, the metrics, the legacy baseline, BEIR.

`run_evaluation(chunks, fixture, thresholds, ...) -> (report, failures)` is the single
entry point for the blocking `retrieval_eval` check and `brain-pipeline eval`.

The package re-exports nothing: import the module that owns a name, so importing one
module never loads the others (the preflight's refusal stays free of numpy and Dagster).
"""
