"""`schedule.sensor_enabled` and `schedule.sensor_min_interval_seconds` reach both sensors.

The README's configuration table: the first is the default status of
`corpus_observation_sensor` and `automation_sensor` (off unless set), the second their
interval. (The schedule's own keys are pinned in test_definitions.py.)
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import yaml

from brain_pipeline.definitions import build_definitions

SENSORS = ("corpus_observation_sensor", "automation_sensor")


def _defs(tmp_path: Path, schedule: dict[str, object]) -> dg.Definitions:
    config = tmp_path / "corpus_config.yaml"
    config.write_text(yaml.safe_dump({"schedule": schedule}), encoding="utf-8")
    return build_definitions(str(config))


def test_both_sensors_are_stopped_unless_enabled_and_follow_the_interval(tmp_path: Path) -> None:
    default = _defs(tmp_path, {})
    enabled = _defs(tmp_path, {"sensor_enabled": True, "sensor_min_interval_seconds": 17})
    for name in SENSORS:
        assert default.resolve_sensor_def(name).default_status == dg.DefaultSensorStatus.STOPPED
        assert default.resolve_sensor_def(name).minimum_interval_seconds == 60
        sensor = enabled.resolve_sensor_def(name)
        assert sensor.default_status == dg.DefaultSensorStatus.RUNNING
        assert sensor.minimum_interval_seconds == 17
