"""Dagster-aware helpers: the instance, the runner, step prologues. Below `defs/`."""
