"""The log's clock: its newest timestamp, the date lent to stamps that print none, and the count of boot events.

One clock runs through the whole log, across the boots it holds: a boot being read shares it, and a finished boot
keeps a copy taken when the next one began (its report is as of that moment).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class LogClock:
    now: str | None = None  # the newest timestamp read so far
    now_s: float = float("-inf")  # the same, in seconds
    year: str | None = None  # of the last dated timestamp, lent to vLLM's year-less ones
    day: str | None = None  # likewise the last date, lent to time-only stamps
    # Boot events (phases begun or ended, ready) counted so far: orders a failure against the progress after it.
    seq: int = 0
    # The count at the newest event that was progress: a bar met mid-way opens its phase as an event, but shows a
    # phase already under way, not progress after what the log said before it.
    progress: int = 0

    def with_year(self, timestamp: str) -> str:
        """vLLM prints no year: next to SGLang's or Ray's dated records it borrows theirs, so the clock compares."""
        if timestamp[4:5] == "-":  # a dated stamp
            self.year, self.day = timestamp[:4], timestamp[:10]
            return timestamp
        if timestamp[2:3] == "-":
            if self.year is None:
                self.day = timestamp[:5]
                return timestamp
            self.day = f"{self.year}-{timestamp[:5]}"
            return f"{self.year}-{timestamp}"
        if timestamp[2:3] == ":" and self.day is not None:
            # A time without a date (SGLang before 0.4) happened on the day of the records around it.
            return f"{self.day} {timestamp}"
        return timestamp

    def copy(self) -> LogClock:
        return LogClock(self.now, self.now_s, self.year, self.day, self.seq, self.progress)
