"""Dagster resources: the validated configuration, loaded once per run."""

import dagster as dg

from brain_pipeline.config import BrainConfig, load_config


class BrainSettings(dg.ConfigurableResource):
    """corpus_config.yaml (BRAIN_CONFIG, else ./corpus_config.yaml) plus the environment.

    `config_path` lets a test or a deployment point at another file without touching
    the environment. Secrets are never part of this resource's fields.
    """

    config_path: str | None = None

    def load(self) -> BrainConfig:
        return load_config(self.config_path)
