"""Every place that reads the wall clock, with the clock frozen (freezegun): the loop's tick and
liveness, the Lease's renewTime/acquireTime, `record`'s default --end and `recorded_at`, and a
Retry-After given as an HTTP date. Each test fails if the code reads another clock (monotonic,
local time), keeps a reference to the real one (a default argument bound at import), or rounds
the time the wrong way.

The code takes its clocks as arguments where it can (the tick tests inject them); these tests
cover the defaults production runs with."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from freezegun import freeze_time

from kubernetes.client.exceptions import ApiException

from autoscaler.adapters.kubernetes import KubeClient, KubeThrottled
from autoscaler.adapters.kubernetes.errors import _Op, translate_error
from autoscaler.adapters.prometheus import Series
from autoscaler.cli import main
from autoscaler.config import ConfigWatcher
from autoscaler.controller.leader import LeaderElector, LeaseSettings
from autoscaler.controller.loop import Controller
from autoscaler.replay.recorder import record
from tests.controller.fakes import FakeKube
from tests.kube_api_server import KubeApiServer

# 2027-01-01 00:00:07.25 UTC: a second that is not on a minute and a fraction of one, so that
# flooring, rounding and microseconds show.
FROZEN = "2027-01-01T00:00:07.250000Z"
# freezegun replaces `datetime.datetime` in every loaded module; the official client's models are
# pydantic classes built on first use, which cannot be built on a FakeDatetime: leave it alone (it
# stamps nothing of ours).
IGNORE = ["kubernetes"]
EPOCH = dt.datetime(2027, 1, 1, 0, 0, 7, 250000, tzinfo=dt.UTC).timestamp()


# --- the loop ------------------------------------------------------------------------------------


def test_the_loop_stamps_its_tick_with_the_wall_clock_and_goes_stale_by_elapsed_time(tmp_path: Path) -> None:
    config = tmp_path / "autoscaler.yaml"
    config.write_text("controller: {tick_seconds: 10}\ntargets: []\n")  # idle: no call to the cluster
    kube = FakeKube()
    with freeze_time(FROZEN, ignore=IGNORE) as frozen:
        loop = Controller(watcher=ConfigWatcher(config), kube=kube,  # the production default clock
                          prometheus_factory=lambda settings: pytest.fail("no target, no Prometheus"))
        assert loop.tick() == []
        assert loop.last_tick_started == EPOCH
        assert loop.metrics.last_tick._value.get() == EPOCH
        frozen.tick(3 * 10 + 30)  # three ticks + 30 s (freezegun moves the monotonic clock too): still alive
        assert loop.healthy()
        frozen.tick(0.5)
        assert not loop.healthy()
    kube.verify()


def test_a_step_of_the_wall_clock_neither_fails_liveness_nor_keeps_a_stuck_loop_alive(tmp_path: Path) -> None:
    config = tmp_path / "autoscaler.yaml"
    config.write_text("controller: {tick_seconds: 10}\ntargets: []\n")
    wall, mono = [1_000_000.0], [50.0]
    loop = Controller(watcher=ConfigWatcher(config), kube=FakeKube(), clock=lambda: wall[0],
                      monotonic=lambda: mono[0], prometheus_factory=lambda settings: pytest.fail("no target"))
    assert loop.tick() == []
    wall[0] += 3600.0  # NTP steps the wall clock an hour ahead; 5 s have passed
    mono[0] += 5.0
    assert loop.healthy()  # the wall clock read it as 3,605 s without a tick: a needless restart
    wall[0] -= 7200.0  # and back two hours; 61 s have passed without a tick (limit 3 x 10 + 30)
    mono[0] += 56.0
    assert not loop.healthy()  # the wall clock read it as an hour in the future: alive forever


# --- leader election --------------------------------------------------------------------------------


@pytest.fixture
def client(kubeconfig_path: Path) -> Iterator[KubeClient]:
    c = KubeClient.from_environment(kubeconfig=str(kubeconfig_path), sleep=lambda s: None, retry_attempts=1)
    yield c
    c.close()


def _instant(micro_time: str) -> dt.datetime:
    return dt.datetime.fromisoformat(micro_time.replace("Z", "+00:00"))


def test_the_lease_is_stamped_in_utc_microseconds_by_the_wall_clock(kube_server: KubeApiServer,
                                                                      client: KubeClient) -> None:
    frozen_at = dt.datetime.fromtimestamp(EPOCH, dt.UTC)
    with freeze_time(FROZEN, ignore=IGNORE) as frozen:
        elector = LeaderElector(client, LeaseSettings(namespace="autoscaler", identity="a"))  # default clocks
        assert elector.step()
        lease = kube_server.get("leases", "autoscaler", "vllm-queue-autoscaler")
        assert lease is not None
        assert _instant(lease["spec"]["acquireTime"]) == _instant(lease["spec"]["renewTime"]) == frozen_at
        frozen.tick(2)
        assert elector.step()
    lease = kube_server.get("leases", "autoscaler", "vllm-queue-autoscaler")
    assert lease is not None
    assert _instant(lease["spec"]["renewTime"]) == frozen_at + dt.timedelta(seconds=2)  # renewed at now
    assert _instant(lease["spec"]["acquireTime"]) == frozen_at  # acquired once: kept


# --- record -----------------------------------------------------------------------------------------


def _record(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["record", "--prometheus", "http://127.0.0.1:9", "--target", "llm/qwen",
                                       "--out", "/nonexistent/r.jsonl.gz", "--step", "60s", *args])
    return result.exit_code, result.output


def test_record_ends_by_default_at_now_floored_to_the_step() -> None:
    on_grid = int(EPOCH // 60 * 60)  # 2027-01-01T00:00:00Z
    with freeze_time(FROZEN, ignore=IGNORE):
        # --start one second after the default --end: refused, so --end < on_grid + 1 ...
        code, out = _record("--start", str(on_grid + 1))
        assert code == 2 and "--end is before --start" in out, out
        # ... and --start at on_grid passes that check (it fails later, on the missing token file,
        # before any query), so --end >= on_grid: the default --end is the minute floored.
        code, out = _record("--start", str(on_grid), "--bearer-token-file", "/nonexistent/token")
        assert code != 0 and "--end is before --start" not in out and "/nonexistent/token" in out, out


class _EmptySource:
    """A `RangeSource` (the protocol recorder.record reads through) with no series at all."""

    def query_range(self, promql: str, start: float, end: float, step_seconds: float) -> list[Series]:
        return []


def test_a_recording_is_stamped_with_the_wall_clock() -> None:
    with freeze_time(FROZEN, ignore=IGNORE):
        header, _ = record(_EmptySource(), namespace="llm", deployment="qwen", start=EPOCH - 600, end=EPOCH,
                           step_seconds=60)
    assert header.metadata["recorded_at"] == EPOCH


# --- Retry-After as an HTTP date -------------------------------------------------------------------


def test_retry_after_as_an_http_date_counts_from_now() -> None:
    # The API server sends seconds (the API test server only those); a proxy in front of it may
    # send the HTTP-date form, which counts from the wall clock now.
    exc = ApiException(status=429, reason="Too Many Requests")
    exc.headers = {"Retry-After": "Fri, 01 Jan 2027 00:01:37 GMT"}
    with freeze_time(FROZEN, ignore=IGNORE):
        error = translate_error(exc, _Op("get", "configmaps", "llm", "st"))
    assert isinstance(error, KubeThrottled)
    assert error.retry_after == pytest.approx(89.75)  # 00:01:37 - 00:00:07.25, both UTC
