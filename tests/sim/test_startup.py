"""Start-up time distributions: measured model-load spread centred on the profile, assumed node
provisioning range, fixed mode, determinism per seed."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from autoscaler.sim.profile import load_profile
from autoscaler.sim.startup import (
    StartupTimes,
    least_load_s,
    least_provision_s,
    load_ratio,
    model_load_s,
    model_size_b,
    node_provision_s,
    process_ready_samples,
)

P = load_profile("qwen3-8b-h100")  # model load 90 s (container 20 s), node 300 s


@pytest.mark.parametrize(("label", "size"), [("llama2-13b-hf", 13.0), ("qwen-0.5b", 0.5), ("llama3-3b", 3.0),
                                             ("falcon-7b", 7.0), ("yi-9b", 9.0), ("no-size", None)])
def test_model_size_from_the_profiler_labels(label: str, size: float | None) -> None:
    assert model_size_b(label) == size


def test_the_samples_are_the_twelve_7_to_14b_rows_of_the_csv() -> None:
    s = process_ready_samples()
    # falcon-7b, llama2-7b-hf, llama2-13b-hf, qwen-7b, qwen-14b, yi-9b; A100 warm and H100 cold
    assert len(s) == 12 and s[0] == 44.952 and s[-1] == 98.33  # llama2-7b-hf warm, qwen-14b cold
    assert 47.957 in s and 67.193 in s  # llama2-7b-hf and qwen-7b cold
    assert 43.755 not in s and 45.932 not in s  # yi-6b (6B) left out
    assert np.median(s) == pytest.approx((54.314 + 58.709) / 2)


def test_model_load_is_centred_on_the_profile_with_the_measured_spread() -> None:
    # ratio to the median: 44.952 / 56.5115 = 0.7954 at u = 0, 98.33 / 56.5115 = 1.7400 at u = 1
    assert load_ratio(np.array([0.0, 0.5, 1.0])).tolist() == pytest.approx([0.79545, 1.0, 1.74000], abs=1e-5)
    lo, mid, hi = model_load_s(P, np.array([0.0, 0.5, 1.0]))
    assert mid == pytest.approx(90.0)  # the profile's model_load_s stays the median
    assert lo == pytest.approx(20.0 + 70.0 * 0.79545, abs=1e-3)  # 75.68 s: container 20 s fixed
    assert hi == pytest.approx(20.0 + 70.0 * 1.74000, abs=1e-3)  # 141.80 s
    u = np.linspace(0.0, 1.0, 10_001)
    assert float(np.median(model_load_s(P, u))) == pytest.approx(90.0)
    # a profile whose load is shorter than its container start scales nothing below it
    short = replace(P, model_load_s=10.0, container_start_s=20.0)
    assert model_load_s(short, np.array([0.0, 1.0])).tolist() == [10.0, 10.0]


def test_node_provisioning_is_the_assumed_3_to_7_minutes() -> None:
    assert node_provision_s(P, np.array([0.0, 0.5, 1.0])).tolist() == pytest.approx([180.0, 300.0, 420.0])


def test_the_least_start_up_times_are_the_draws_at_u_0() -> None:
    # what the lead-time bound may charge every new pod and node: no draw is ever shorter
    assert least_load_s(P, "random") == pytest.approx(20.0 + 70.0 * 0.79545, abs=1e-3)  # 75.68 s
    assert least_provision_s(P, "random") == pytest.approx(180.0)
    assert (least_load_s(P, "fixed"), least_provision_s(P, "fixed")) == (90.0, 300.0)
    st = StartupTimes(P, "random", np.random.default_rng(5))
    assert min(st.pod_load_s() for _ in range(2000)) >= least_load_s(P, "random")
    assert min(st.node_provision_s() for _ in range(2000)) >= least_provision_s(P, "random")


def test_fixed_mode_returns_the_profile_numbers() -> None:
    st = StartupTimes(P, "fixed", np.random.default_rng(0))
    assert [st.pod_load_s(), st.pod_load_s(), st.node_provision_s()] == [90.0, 90.0, 300.0]


def test_random_draws_are_deterministic_per_seed_and_streams_independent() -> None:
    def draws(seed: int, nodes_first: int) -> list[float]:
        st = StartupTimes(P, "random", np.random.default_rng(seed))
        for _ in range(nodes_first):
            st.node_provision_s()
        return [st.pod_load_s() for _ in range(5)]

    a = draws(0, 0)
    assert a == draws(0, 0) and a != draws(1, 0)
    assert a == draws(0, 7)  # node draws do not shift the pods' sequence
    assert len(set(a)) == 5 and all(75.6 < x < 141.9 for x in a)


def test_an_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="startup: expected one of random, fixed"):
        StartupTimes(P, "lognormal", np.random.default_rng(0))  # type: ignore[arg-type]
