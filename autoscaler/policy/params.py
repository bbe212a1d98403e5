"""Policy knobs: typed, validated and defaulted in this one place.

`PolicyParams` is what `decide()` reads. The ConfigMap (`autoscaler.config`) holds one set of
defaults plus per-target overrides of these same keys; it validates them through this model, so a
key's type, unit, default and allowed range are written exactly once, here.

Every key carries its unit in its name. Ranges are inclusive unless written `> x`.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from autoscaler.policy.capacity_table import CAPACITY_TABLE


class SloParams(BaseModel):
    """The service-level objective of one target: what the SLO capacity step sizes for."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ttft_seconds: float = Field(2.0, gt=0.0, le=3600.0, description="Time to first token a request must meet.")
    tpot_seconds: float = Field(
        0.1, gt=0.0, le=60.0, description="Time per output token (after the first) a request must meet."
    )
    attainment_target: float = Field(
        0.99, ge=0.5, le=0.999, description="Share of requests that must meet both bounds."
    )
    ttft_seconds_per_1k_prompt_tokens: float = Field(
        0.0, ge=0.0, le=3600.0,
        description="Length-aware TTFT for long-context services: the bound grows by this per 1,000 prompt tokens (of the window's mean prompt); 0 = a flat bound.",
    )


def _known_profile(value: str | None) -> str | None:
    """A row of the shipped capacity table. An annotation, not a model check, so that the config's
    overrides check it where it is set (`defaults.capacity_profile`), not once per target that
    inherits it."""
    if value is not None and value not in CAPACITY_TABLE:
        raise PydanticCustomError("capacity_profile", "must be one of {rows}",
                                  {"rows": ", ".join(sorted(CAPACITY_TABLE))})
    return value


class PolicyParams(BaseModel):
    """Tuning of the decision core for one target Deployment."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # --- bounds -------------------------------------------------------------------------------
    min_replicas: int = Field(1, ge=1, le=10_000, description="Never fewer replicas (no scale to zero).")
    max_replicas: int = Field(10, ge=1, le=10_000, description="Never more replicas.")
    gpus_per_replica: int = Field(1, ge=1, le=64, description="GPUs one replica requests.")
    max_gpus: int | None = Field(
        None, ge=1, le=100_000, description="Optional GPU budget: replicas <= max_gpus // gpus_per_replica."
    )

    # --- metric health ------------------------------------------------------------------------
    stale_after_seconds: float = Field(
        60.0, ge=1.0, le=3600.0, description="A sample older than this is stale: it can never scale down."
    )

    # --- demand -------------------------------------------------------------------------------
    target_waiting_per_replica: float = Field(
        3.0, gt=0.0, le=10_000.0, description="Requests waiting per ready replica we aim for."
    )
    target_kv_cache_usage_ratio: float = Field(
        0.8, gt=0.0, le=1.0, description="KV-cache usage (0-1) per ready replica we aim for."
    )
    target_running_per_replica: float | None = Field(
        None, gt=0.0, le=100_000.0,
        description="Optional: running requests (the batch) per ready replica we aim for, from the TPOT SLO; null = off.",
    )
    queue_drain_seconds: float = Field(
        120.0, gt=0.0, le=86_400.0, description="Waiting requests above target are sized to drain within this."
    )
    saturated_waiting_per_replica: float = Field(
        1.0, gt=0.0, le=10_000.0, description="A replica with at least this many waiting runs a full batch."
    )
    tolerance_ratio: float = Field(
        0.1, ge=0.0, le=1.0, description="Demand within this ratio of current replicas holds (HPA's 10%)."
    )

    # --- SLO capacity ---------------------------------------------------------------------------
    slo: SloParams = Field(default_factory=SloParams, description="The latency objective the fleet is sized for.")
    capacity_profile: Annotated[str | None, AfterValidator(_known_profile)] = Field(
        None, min_length=1, max_length=253,
        description="Cold start of the learned capacity: a row of the shipped table of published capacities (model/GPU); null = the table's generic row.",
    )
    capacity_prompt_tokens_per_second: float | None = Field(
        None, gt=0.0, le=1e9, description="Cold start override: prompt tokens/s one replica serves within the SLO; null = from the profile."
    )
    capacity_generation_tokens_per_second: float | None = Field(
        None, gt=0.0, le=1e9, description="Cold start override: generated tokens/s one replica serves within the SLO; null = from the profile."
    )

    capacity_learning_max_step_ratio: float = Field(
        1.1, ge=1.0, le=2.0,
        description="The learned capacity moves by at most this factor per tick (toward the observed load), except that a "
                    "load carried within the SLO with no queue is taken at once; 1 = never learn.",
    )
    capacity_learning_min_requests_per_second: float = Field(
        1.0, ge=0.0, le=1e6,
        description="Fleet requests/s in a latency histogram below which its attainment is not trusted for learning.",
    )
    headroom_half_life_seconds: float = Field(
        1800.0, ge=60.0, le=604_800.0,
        description="Half-life of the moments of the demand's log-growth over one lead time (the SLO headroom).",
    )
    headroom_max_ratio: float = Field(
        2.0, ge=1.0, le=10.0, description="The SLO headroom multiplies the SLO replicas by at most this."
    )

    # --- lead time ----------------------------------------------------------------------------
    model_load_seconds_default: float = Field(
        300.0, ge=0.0, le=86_400.0, description="Scheduled -> ready, until enough pods were observed."
    )
    node_provision_seconds_default: float = Field(
        300.0, ge=0.0, le=86_400.0, description="Unschedulable -> scheduled, until enough pods were observed."
    )
    lead_time_min_samples: int = Field(3, ge=1, le=1000, description="Observed pods needed before learning.")
    lead_time_percentile: float = Field(0.9, ge=0.5, le=1.0, description="Robust high percentile of samples.")
    lead_time_window_seconds: float = Field(
        604_800.0, ge=60.0, le=31_536_000.0, description="Samples older than this are forgotten."
    )
    lead_time_max_samples: int = Field(50, ge=1, le=1000, description="Newest samples kept per kind.")

    # --- forecast -----------------------------------------------------------------------------
    forecast_window_seconds: float = Field(
        120.0, ge=0.0, le=3600.0, description="Window of the load trend and of the arrival-rate estimate; 0 disables the forecast and the rate model."
    )
    forecast_min_samples: int = Field(3, ge=2, le=1000, description="Load samples needed to fit a trend.")
    forecast_max_growth_ratio: float = Field(
        1.5, ge=1.0, le=100.0, description="Forecast <= this x the value now; while pods load, demand must outgrow the plan by it."
    )

    # --- stabilisation and rate limits ----------------------------------------------------------
    scale_up_window_seconds: float = Field(
        0.0, ge=0.0, le=3600.0, description="Scale up to the lowest recommendation in this window; 0 = at once."
    )
    scale_down_window_seconds: float = Field(
        300.0, ge=0.0, le=86_400.0, description="Scale down to the highest recommendation in this window..."
    )
    scale_down_window_lead_times: float = Field(
        1.0, ge=0.0, le=10.0,
        description="...or in this many lead times with a new node, if longer; 0 = the window alone.",
    )
    scale_down_max_pods: int = Field(1, ge=1, le=10_000, description="At most this many pods removed per period.")
    scale_down_period_seconds: float = Field(
        120.0, ge=1.0, le=86_400.0, description="Period of the scale-down pod limit."
    )
    scale_up_max_percent: float = Field(
        100.0, ge=0.0, le=10_000.0, description="HPA-style: add up to this percent per period..."
    )
    scale_up_max_pods: int = Field(4, ge=0, le=10_000, description="...or this many pods, whichever is more.")
    scale_up_period_seconds: float = Field(15.0, ge=1.0, le=3600.0, description="Period of the scale-up limits.")

    @model_validator(mode="after")
    def _bounds_ordered(self) -> PolicyParams:
        if self.min_replicas > self.max_replicas:
            raise ValueError(
                f"min_replicas = {self.min_replicas}, must be <= max_replicas ({self.max_replicas})"
            )
        if self.max_gpus is not None and self.max_gpus < self.gpus_per_replica * self.min_replicas:
            raise ValueError(
                f"max_gpus = {self.max_gpus}, must be >= gpus_per_replica * min_replicas "
                f"({self.gpus_per_replica * self.min_replicas})"
            )
        if self.scale_up_max_percent == 0 and self.scale_up_max_pods == 0:
            raise ValueError(
                "scale_up_max_pods = 0, must be >= 1 when scale_up_max_percent is 0 (scale-up would be impossible)"
            )
        return self
