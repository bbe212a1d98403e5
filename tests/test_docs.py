"""The README's configuration reference stays in step with the models."""

from __future__ import annotations

from pathlib import Path

from autoscaler.config import ControllerSettings, PrometheusSettings
from autoscaler.policy.params import PolicyParams

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def test_every_key_is_in_the_readme_reference() -> None:
    keys = [f"`{k}`" for k in PolicyParams.model_fields]
    keys += [f"`controller.{k}`" for k in ControllerSettings.model_fields if k != "prometheus"]
    keys += [f"`controller.prometheus.{k}`" for k in PrometheusSettings.model_fields]
    missing = [k for k in keys if f"| {k} |" not in README]
    assert not missing, f"README configuration reference lacks {missing}"


def test_readme_has_the_two_commands() -> None:
    assert "make demo" in README and "make test" in README
