"""Retrieval evaluation: the metrics, the legacy baseline, BEIR; the labelled fixture in `fixture/`.

`service.evaluate_store_dir` is the single entry point for the blocking `retrieval_eval`
check and `brain-pipeline eval`: `runner.evaluate` measures, `verdict.judge` judges once
(the `EvaluationVerdict` the publish gate reads back from the evaluation record), `reports`
shows.

The package re-exports nothing: import the module that owns a name, so importing one
module never loads the others (the preflight's refusal stays free of numpy and Dagster).
"""
