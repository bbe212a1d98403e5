"""The one history type of the decision core: `(t, value)` entries kept for a time window.

Every history `decide()` keeps is a `TimeWindow`: the recommendations of the stabilisation
windows, the scale events of the rate limits, the load, throughput and arrival readings of the
forecast, and the learned lead-time samples. In the spirit of Knative's
`pkg/autoscaler/aggregation/max/timewindow.go` (record a value at a time, forget what left the
window, read the maximum), but immutable, and a tuple: as cheap to keep in `PolicyState` as the
plain tuples it replaces, equal to them, and printed and written to JSON exactly like them.
Functions that take a history accept a plain tuple of `(t, value)` pairs too (`TimeWindow.of`).

One rule for every window: an entry is inside a window of `seconds` at `now` when
`now - t < seconds`, so one exactly `seconds` old is out (as HPA's `timestamp.After(cutoff)`).
Entries are recorded oldest first, but a clock that steps back can leave a window out of
order: `within`, `highest` and `lowest` look at every entry. Readings, one a tick, are kept in
time order by `record_reading`, which therefore only looks at the ends.
"""

from __future__ import annotations

from typing import TypeVar

V = TypeVar("V", int, float)

Entries = tuple[tuple[float, V], ...]  # a history as PolicyState accepts it: (t, value), oldest first


class TimeWindow(tuple[tuple[float, V], ...]):
    """`(t, value)` entries, oldest first. Immutable: every change returns a new window."""

    __slots__ = ()

    @staticmethod
    def of(entries: Entries[V]) -> TimeWindow[V]:
        """The entries as a window (the very same object when they already are one)."""
        return entries if isinstance(entries, TimeWindow) else TimeWindow(entries)

    def within(self, now: float, seconds: float) -> TimeWindow[V]:
        """Prune: the entries less than `seconds` old at `now`. An entry stamped after `now`
        (the clock stepped back) is stamped `now`: it stays for one window from here, not for
        the length of the step (a scale event an hour "ahead" blocked scale-ups for the hour).

        Worked example: entries at t = 1000, 1001 and 1120, now 1120, 120 s: the 1000 is
        exactly 120 s old and drops out, the 1001 (119 s) and the 1120 (0 s) stay. An entry
        at 4720 at now 1120: (1120, ...).
        """
        for t, _ in self:
            if not (now - t < seconds and t <= now):
                return TimeWindow([(min(t, now), v) for t, v in self if now - min(t, now) < seconds])
        return self  # the usual case: nothing to drop

    def record(self, now: float, value: V) -> TimeWindow[V]:
        """The window with `(now, value)` added as the newest entry.

        Worked example: ((15, 2),) recording 3 at t = 30 gives ((15, 2), (30, 3)).
        """
        return TimeWindow(self + ((now, value),))

    def record_reading(self, now: float, value: V, seconds: float) -> TimeWindow[V]:
        """Record a reading taken at `now` and prune to the window of `seconds`. A reading
        taken again at `now` replaces the one before (as does one stamped later: the clock
        stepped back). A window of 0 s keeps nothing, not even this reading.

        Readings in time order stay so, and only their ends need a look: the oldest ones at
        the front while outside the window, those stamped at `now` or later at the back. So
        for readings this is `within` the window (and before `now`), then `record`.

        Worked example: readings at t = 1000, 1001 and 1120, window 120 s: recording 5 at
        now 1120 drops the 1000 (120 s old) and replaces the 1120: ((1001, ...), (1120, 5)).
        """
        if seconds <= 0.0:  # the reading itself, 0 s old, is outside
            return TimeWindow()
        start, end = 0, len(self)
        while start < end and now - self[start][0] >= seconds:
            start += 1
        while end > start and self[end - 1][0] >= now:
            end -= 1
        return TimeWindow(self[start:end] + ((now, value),))

    def record_peak(self, now: float, value: V) -> TimeWindow[V]:
        """Record `value` in a window read only for its maximum: first drop the newest entries
        that it equals or exceeds. Being older, they leave the window first, so they can never
        be its maximum again; the window stays short (decreasing) and its maximum the same.

        Worked example: ((100, 6), (200, 4), (300, 3)) recording 4 at t = 400 drops the 3 and
        the 4 and gives ((100, 6), (400, 4)).
        """
        end = len(self)
        while end and self[end - 1][1] <= value:
            end -= 1
        return TimeWindow(self[:end] + ((now, value),))

    def newest(self, count: int) -> TimeWindow[V]:
        """The newest `count` entries (the last ones), as `entries[-count:]`.

        Worked example: ((1, 10), (2, 20), (3, 30)), newest 2: ((2, 20), (3, 30)).
        """
        kept = self[-count:]
        return self if len(kept) == len(self) else TimeWindow(kept)

    def total(self) -> V:
        """The sum of the values (0 when empty).

        Worked example: ((990, 1), (1000, 2)) totals 3.
        """
        return sum([v for _, v in self])

    def highest(self, now: float, seconds: float, at_least: V) -> V:
        """The highest value inside the window of `seconds` at `now`, or `at_least` when that
        is higher (or nothing is inside).

        Worked example: ((400, 6), (700, 4)) at now 1000: 600 s, at least 3: 4 (the 6 is out);
        601 s: 6; 600 s, at least 5: 5.
        """
        for t, v in self:
            if now - t < seconds and v > at_least:
                at_least = v
        return at_least

    def lowest(self, now: float, seconds: float, at_most: V) -> V:
        """The lowest value inside the window of `seconds` at `now`, or `at_most` when that is
        lower (or nothing is inside).

        Worked example: ((1000, 5),) at now 1059, 60 s, at most 8: 5; at now 1060: 8.
        """
        for t, v in self:
            if now - t < seconds and v < at_most:
                at_most = v
        return at_most
