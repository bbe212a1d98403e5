"""Print the decision log of a burst: the queue signal, the lead time, pods in flight, and no
cascade. Runs the real decision core (`autoscaler.policy.decide`) tick by tick against the
small fluid fleet of the unit tests (per-pod queues, least-outstanding routing, 300 s from
asking for a replica to its first request), and the usual HPA recipe on the same burst.

    python -m examples.burst_decision_log
"""

from __future__ import annotations

import math

from rich.console import Console
from rich.table import Table

from autoscaler.policy import Decision, PolicyParams, PolicyState, decide
from tests.policy.fluid import Fleet

TICK = 15.0
START = 1_700_000_000.0


def main() -> None:
    params = PolicyParams(max_replicas=64, model_load_seconds_default=300, node_provision_seconds_default=0)
    fleet = Fleet(ready=2)
    fleet.in_system = [16.0, 16.0]
    state = PolicyState()
    log: list[tuple[int, float, Decision]] = []
    for i in range(80):
        now = START + i * TICK
        rate = 12.0 if 10 <= i < 60 else 1.6
        fleet.step(now, TICK, rate)
        decision, state = decide(params, fleet.observe(now), state, now)
        fleet.scale_to(decision.desired_replicas, now)
        log.append((i, rate, decision))

    table = Table(title="queue-lead on a burst: 1.6 -> 12 req/s at t=150 s (a full replica serves 1.6 req/s)")
    for col in ("t s", "arrivals/s", "ready", "in flight", "waiting", "arrivals est.", "queue->repl.",
                "KV->repl.", "lead s", "replicas", "reason", "limit"):
        table.add_column(col, justify="right" if col not in ("reason", "limit") else "left")
    previous = None
    for i, rate, d in log:
        v = d.values
        key = (d.desired_replicas, d.reason, v.ready_replicas, v.pods_in_flight)
        if key == previous and i % 8:
            continue
        previous = key
        table.add_row(
            f"{i * TICK:.0f}", f"{rate:.1f}", str(v.ready_replicas), str(v.pods_in_flight),
            f"{v.waiting_total:.0f}",
            "-" if v.arrivals_per_second is None else f"{v.arrivals_per_second:.1f}",
            f"{v.queue_replicas:.1f}", f"{v.kv_replicas:.1f}", f"{v.lead_time_seconds:.0f}",
            f"{d.current_replicas} -> {d.desired_replicas}", d.reason.value, d.clamp.value if d.clamp else "",
        )
    console = Console(width=160)
    console.print(table)

    # the usual HPA recipe on the same burst: AverageValue 5 on vllm:num_requests_waiting
    hpa = Fleet(ready=2)
    hpa.in_system = [16.0, 16.0]
    hpa_replicas = []
    for i in range(80):
        now = START + i * TICK
        hpa.step(now, TICK, 12.0 if 10 <= i < 60 else 1.6)
        desired = max(hpa.spec, min(math.ceil(hpa.waiting / 5), max(2 * hpa.spec, hpa.spec + 4), 64))
        hpa.scale_to(desired, now)
        hpa_replicas.append(desired)
    ours = [d.desired_replicas for _, _, d in log]
    console.print(
        f"needed for 12 req/s: {math.ceil(12 / 1.6)} replicas.  queue-lead peak: {max(ours)}, "
        f"scale-ups: {sum(1 for _, _, d in log if d.direction == 'up')}.  "
        f"HPA on waiting (AverageValue 5) peak: {max(hpa_replicas)} (it chases the backlog that "
        "piles up on the old pods while new ones load)."
    )


if __name__ == "__main__":
    main()
