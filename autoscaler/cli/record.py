"""`autoscaler record`: every series the decision core reads for one Deployment, from Prometheus
into one recording file (`autoscaler replay --metrics`).

Every failure the user can fix prints one line `error: ...` to stderr and exits 2.
"""

from __future__ import annotations

import math
import signal
import sys
import time
from types import FrameType

import click

from autoscaler.cli.errors import fail
from autoscaler.cli.output import check_distinct_paths, check_output_path, no_progress_option
from autoscaler.cli.values import parse_duration, parse_target, parse_time

MAX_STEPS = 5_000_000
"""Steps of one recording (a month at 1 s is 2.6 million)."""
MAX_TOKEN_CHARS = 65_536
MIN_STEP_SECONDS = 0.001
"""Prometheus' query resolution (a millisecond)."""


@click.command("record")
@click.option("--prometheus", "prometheus_url", required=True, help="Prometheus base URL.")
@click.option("--target", required=True, help="NAMESPACE/DEPLOYMENT to record.")
@click.option("--since", default="24h", show_default=True, help="How far back from --end.")
@click.option("--start", "start_text", default=None, help="Start (Unix seconds or ISO 8601); overrides --since.")
@click.option("--end", "end_text", default=None, help="End (Unix seconds or ISO 8601); default: now, on the step grid.")
@click.option("--step", default="15s", show_default=True, help="Evaluation step (the controller's tick).")
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="Output file (.jsonl.gz).")
@click.option("--pod-regex", default=None, help="RE2 regex of the Deployment's pod names (default NAME-<hash>-<id>).")
@click.option("--rate-window", default="60s", show_default=True, help="Window of rate() of the request and token counters and latency buckets.")
@click.option("--timeout", "timeout_seconds", default=30.0, show_default=True, help="Timeout of one query, seconds.")
@click.option("--bearer-token-file", default=None, type=click.Path(dir_okay=False), help="Bearer token file.")
@click.option("--ca-file", default=None, type=click.Path(dir_okay=False), help="PEM CA bundle.")
@click.option("--insecure-skip-tls-verify", is_flag=True, help="Do not verify Prometheus' certificate.")
@no_progress_option("--quiet")
def record(
    prometheus_url: str, target: str, since: str, start_text: str | None, end_text: str | None, step: str,
    out: str, pod_regex: str | None, rate_window: str, timeout_seconds: float, bearer_token_file: str | None,
    ca_file: str | None, insecure_skip_tls_verify: bool, no_progress: bool, no_progress_alias: bool,
) -> None:
    """Record every series the decision core reads for one Deployment into one file.

    Progress and the closing summary go to stderr; --no-progress silences both."""
    quiet = no_progress or no_progress_alias
    from autoscaler.adapters.prometheus import PrometheusError, PrometheusSource
    from autoscaler.replay.format import MAX_TIMESTAMP, STEP_SECONDS_RANGE, write_recording
    from autoscaler.replay.recorder import record as do_record

    try:
        namespace, deployment = parse_target(target)
        step_seconds = parse_duration(step)
        if not step_seconds >= MIN_STEP_SECONDS:
            raise ValueError(f"--step {step[:100]}: must be at least {MIN_STEP_SECONDS * 1000:g} ms (Prometheus' resolution)")
        if not step_seconds <= STEP_SECONDS_RANGE[1]:  # what the reader takes
            raise ValueError(f"--step {step[:100]}: must be at most {STEP_SECONDS_RANGE[1]:g} s (one day)")
        window = parse_duration(rate_window)
        if window < 1 or window != int(window):
            raise ValueError("--rate-window must be a whole number of seconds >= 1")
        end = parse_time(end_text) if end_text else math.floor(time.time() / step_seconds) * step_seconds
        start = parse_time(start_text) if start_text else end - parse_duration(since)
        for flag, value in (("--end", end), ("--start", start)):  # --start may derive from --end
            if not 0.0 <= value <= MAX_TIMESTAMP:
                raise ValueError(f"{flag} {value!r}: must be a time from 1970 to 9999")
        if end < start:
            raise ValueError("--end is before --start")
        if (end - start) / step_seconds + 1 > MAX_STEPS:
            raise ValueError(f"--step {step}: {(end - start) / step_seconds + 1:.3g} steps from --start to --end "
                             f"(allowed: at most {MAX_STEPS:,}): a larger --step or a shorter window")
        if not (math.isfinite(timeout_seconds) and 0.0 < timeout_seconds <= 3600.0):
            raise ValueError(f"--timeout {timeout_seconds!r}: must be > 0 and <= 3600 seconds")
        token = None
        if bearer_token_file:
            try:
                with open(bearer_token_file, encoding="utf-8") as fh:
                    token = fh.read(MAX_TOKEN_CHARS + 1).strip()  # not the whole of /dev/zero
            except (OSError, UnicodeDecodeError) as exc:
                raise ValueError(f"--bearer-token-file {bearer_token_file}: "
                                 f"{getattr(exc, 'strerror', None) or exc}") from exc
            if len(token) > MAX_TOKEN_CHARS:
                raise ValueError(f"--bearer-token-file {bearer_token_file}: longer than {MAX_TOKEN_CHARS:,} characters")
        source = PrometheusSource(
            prometheus_url, timeout_seconds=timeout_seconds, bearer_token=token, ca_file=ca_file,
            insecure_skip_tls_verify=insecure_skip_tls_verify,
        )
    except (ValueError, OSError) as exc:
        fail(str(exc))
    check_output_path("--out", out)  # before the queries, not after them
    check_distinct_paths([("--out", out)], [("--bearer-token-file", bearer_token_file), ("--ca-file", ca_file)])

    def progress(done: int, total: int) -> None:
        if not quiet:
            click.echo(f"\rrecording: query {done}/{total}", nl=done == total, err=True)

    # SIGTERM (kubectl delete, a CI timeout) unwinds like Ctrl-C: the recording being written is a
    # temporary file that is removed, and the previous file at --out stays whole (issue 13, defect 8)
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        with source:
            header, steps = do_record(
                source, namespace=namespace, deployment=deployment, start=start, end=end,
                step_seconds=step_seconds, pod_regex=pod_regex, rate_window_seconds=int(window),
                prometheus_url=repr(source).split("url=")[1].split(",")[0].strip("'"), progress=progress,
            )
        if not any(s.pods for s in steps):
            fail(f"no pod of {namespace}/{deployment} in Prometheus from {start:.0f} to {end:.0f} "
                 f"(pods matching {header.metadata.get('pod_regex', '?')!r}): {out} not written; "
                 "check --target, --pod-regex and the namespace and pod labels of the vLLM series")
        n = write_recording(out, header, steps)
    except PrometheusError as exc:
        fail(f"Prometheus: {exc}")
    except (OSError, ValueError) as exc:
        fail(str(exc))
    pods = len({p.name for s in steps for p in s.pods})
    if not quiet:
        click.echo(f"wrote {out}: {n} steps of {step_seconds:g} s, {pods} pods; "
                   f"readiness from {header.metadata['readiness_source']}, spec from {header.metadata['spec_source']}",
                   err=True)


def _exit_on_sigterm(signum: int, _frame: FrameType | None) -> None:
    click.echo("\nerror: terminated (SIGTERM): --out left as it was", err=True)
    sys.exit(128 + signum)
