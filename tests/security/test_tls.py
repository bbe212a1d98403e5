"""TLS to Prometheus: verified by default, against `ca_file` when given, and off only with
the explicit `insecure_skip_tls_verify: true` (which is logged as a warning)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
import urllib3  # noqa: F401 - named in the warning filter

from autoscaler.config import PrometheusSettings, load_config_text
from autoscaler.controller.loop import default_prometheus_factory
from autoscaler.adapters.prometheus import QUERIES_PER_FETCH, PrometheusSource, PrometheusUnavailable
from tests.security.stub_prometheus import StubPrometheus, self_signed_certificate

pytestmark = pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return self_signed_certificate(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def https_prometheus(certificate: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> Iterator[StubPrometheus]:
    # no CA bundle from the environment: the default must be the system/certifi trust store
    for var in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR"):
        monkeypatch.delenv(var, raising=False)
    cert, key = certificate
    with StubPrometheus(cert=cert, key=key) as stub:
        yield stub


def test_the_default_refuses_a_certificate_it_cannot_verify(https_prometheus: StubPrometheus) -> None:
    with PrometheusSource(https_prometheus.url, retry_attempts=3, sleep=lambda s: None) as source:
        with pytest.raises(PrometheusUnavailable, match="TLS error") as err:
            source.fetch(["llm"])
    assert err.value.retryable is False  # a TLS failure is not retried
    assert "CERTIFICATE_VERIFY_FAILED" in str(err.value) or "certificate verify failed" in str(err.value)
    assert https_prometheus.requests == []  # nothing was sent over the unverified connection


def test_ca_file_accepts_the_certificate(https_prometheus: StubPrometheus, certificate: tuple[Path, Path]) -> None:
    with PrometheusSource(https_prometheus.url, ca_file=str(certificate[0])) as source:
        assert source.fetch(["llm"]) == {}
    assert len(https_prometheus.requests) == QUERIES_PER_FETCH


def test_a_ca_file_for_another_authority_is_refused(https_prometheus: StubPrometheus, tmp_path: Path) -> None:
    other_cert, _ = self_signed_certificate(tmp_path)
    with PrometheusSource(https_prometheus.url, ca_file=str(other_cert)) as source:
        with pytest.raises(PrometheusUnavailable, match="TLS error"):
            source.fetch(["llm"])


def test_insecure_skip_tls_verify_is_the_explicit_opt_out(
    https_prometheus: StubPrometheus, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        source = PrometheusSource(https_prometheus.url, insecure_skip_tls_verify=True)
    with source:
        assert source.fetch(["llm"]) == {}
    assert any("verification" in r.getMessage() and "disabled" in r.getMessage() for r in caplog.records)


def test_the_config_defaults_to_verification_and_the_factory_honours_it(
    https_prometheus: StubPrometheus, certificate: tuple[Path, Path]
) -> None:
    assert PrometheusSettings().insecure_skip_tls_verify is False
    doc = f"controller:\n  prometheus:\n    url: {https_prometheus.url}\ntargets: []\n"
    settings = load_config_text(doc).controller.prometheus
    with default_prometheus_factory(settings) as source:
        with pytest.raises(PrometheusUnavailable, match="TLS error"):
            source.fetch(["llm"])
    with default_prometheus_factory(settings.model_copy(update={"ca_file": str(certificate[0])})) as source:
        assert source.fetch(["llm"]) == {}
    with default_prometheus_factory(settings.model_copy(update={"insecure_skip_tls_verify": True})) as source:
        assert source.fetch(["llm"]) == {}


def test_ca_file_and_insecure_together_are_refused(certificate: tuple[Path, Path]) -> None:
    with pytest.raises(ValueError, match="mutually exclusive"):
        PrometheusSource("https://127.0.0.1:1", ca_file=str(certificate[0]), insecure_skip_tls_verify=True)


def test_a_connection_error_says_why_within_the_shortened_message() -> None:
    """urllib3 puts the whole query URL first; the reason must survive the 300-character cut."""
    with PrometheusSource("http://127.0.0.1:9", retry_attempts=1) as source:  # discard port: nothing listens
        with pytest.raises(PrometheusUnavailable, match="Connection refused"):
            source.fetch(["llm"])
