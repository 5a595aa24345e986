"""When a schedule fires, as pure functions of the schedule and an instant.

Cron expressions are read by `cronsim` (Debian cron's rules, including its handling of
daylight-saving changes: a fire in the skipped hour runs when the clock jumps, one in the
repeated hour runs once); nothing here parses cron itself. Every instant is UTC-aware.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from schemas.schedule import At, Cron, Every, ScheduleSpec, When

MISSED_COUNTED = 10_000
"""Missed cron fires are counted up to this many; a longer outage says "at least"."""
HORIZON = timedelta(days=3660)
"""How far ahead a schedule may plan: an interval or an instant past it is refused (a
delay that far is a mistake, and one past the calendar's end cannot be planned)."""
_DURATION = re.compile(r"^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?\Z")


class ScheduleError(ValueError):
    """A schedule that cannot be made; the message is a sentence saying what is accepted."""


@dataclass(frozen=True)
class Rules:
    """What the operator allows: the shortest gap between two fires, schedules per agent."""

    min_interval: float
    per_agent: int


def duration(text: str) -> float:
    """Seconds in `90s`, `5m`, `1h30m`, `2d` (whole units, largest first)."""
    match = _DURATION.match(text.strip())
    if not text.strip() or match is None:
        raise ScheduleError(
            f"The duration {text!r} cannot be read: write whole days, hours, minutes and "
            "seconds, largest first, as in 90s, 5m, 1h30m or 2d."
        )
    days, hours, minutes, seconds = (int(part or 0) for part in match.groups())
    total = ((days * 24 + hours) * 60 + minutes) * 60 + seconds
    if total > HORIZON.total_seconds():
        raise ScheduleError(_past_horizon(f"every {text.strip()}"))
    return float(total)


def _past_horizon(what: str) -> str:
    return f"A schedule plans at most {HORIZON.days} days ahead; {what} is further."


def zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as error:
        raise ScheduleError(
            f"The time zone {name!r} is not known: name one from the tz database, as in "
            "UTC or Europe/Berlin."
        ) from error


def _cron(when: Cron, start: datetime) -> CronSim:
    if len(when.expression.split()) != 5:
        raise ScheduleError(
            f"The cron expression {when.expression!r} needs five fields (minute hour "
            "day-of-month month day-of-week), as in '0 9 * * 1-5'."
        )
    try:
        return CronSim(when.expression, start.astimezone(zone(when.zone)))
    except CronSimError as error:
        raise ScheduleError(
            f"The cron expression {when.expression!r} cannot be read: each of its five "
            "fields takes numbers in its range, ranges (1-5), lists (1,3), steps (*/15) or *, "
            "and the days must exist in the months named."
        ) from error


def next_fire(when: When, created: datetime, after: datetime) -> datetime | None:
    """The first planned fire strictly after `after`; None when there is none."""
    match when:
        case Every(seconds=seconds):
            ticks = math.floor((after - created).total_seconds() / seconds) + 1
            return created + timedelta(seconds=max(ticks, 1) * seconds)
        case Cron():
            try:
                return next(_cron(when, after)).astimezone(UTC)
            except StopIteration:
                return None
        case At(at=at):
            return at if at > after else None


def missed(when: When, created: datetime, planned: datetime, now: datetime) -> int:
    """Planned fires after `planned` up to `now`: those a late fire stands for."""
    match when:
        case Every(seconds=seconds):

            def ticks(t: datetime) -> int:
                return math.floor((t - created).total_seconds() / seconds)

            return max(0, ticks(now) - ticks(planned))
        case Cron():
            count = 0
            for fire in _cron(when, planned):
                if fire.astimezone(UTC) > now or count >= MISSED_COUNTED:
                    break
                count += 1
            return count
        case At():
            return 0


def check(spec: ScheduleSpec, now: datetime, rules: Rules) -> datetime:
    """The schedule's first fire, or a `ScheduleError` saying why it cannot be made."""
    if not spec.text.strip():
        raise ScheduleError("A schedule needs the text of the message it sends.")
    match spec.when:
        case Every(seconds=seconds) if seconds < rules.min_interval:
            raise ScheduleError(
                f"A schedule fires at most every {rules.min_interval:g} s "
                f"(TEASPILL_SCHEDULE_MIN_SECONDS); every {seconds:g} s is too often."
            )
        case Cron():
            _check_cron_gap(spec.when, now, rules.min_interval)
        case At(at=at) if at <= now:
            raise ScheduleError(f"The instant {at.isoformat()} is past: name one to come.")
        case Every(seconds=seconds) if not seconds <= HORIZON.total_seconds():  # NaN too
            raise ScheduleError(_past_horizon(f"every {seconds:g} s"))
        case At(at=at) if at - now > HORIZON:
            raise ScheduleError(_past_horizon(f"the instant {at.isoformat()}"))
    try:
        first = next_fire(spec.when, now, now)
    except (OverflowError, ValueError) as error:
        raise ScheduleError(_past_horizon("its first fire")) from error
    if first is None:
        raise ScheduleError("The cron expression never matches a day of the coming years.")
    return first


def _check_cron_gap(when: Cron, now: datetime, least: float) -> None:
    """The shortest gap among the next fires must not be under the minimum interval."""
    fires = _cron(when, now)
    previous = None
    for _ in range(8):
        try:
            fire = next(fires)
        except StopIteration:
            return
        if previous is not None and (fire - previous).total_seconds() < least:
            raise ScheduleError(
                f"The cron expression {when.expression!r} fires more often than every "
                f"{least:g} s (TEASPILL_SCHEDULE_MIN_SECONDS)."
            )
        previous = fire
