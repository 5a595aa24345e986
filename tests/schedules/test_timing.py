"""When schedules fire: intervals, cron across daylight-saving changes, missed fires."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from schemas.schedule import At, Cron, Every, ScheduleSpec
from services.schedules.timing import (
    Rules,
    ScheduleError,
    check,
    duration,
    missed,
    next_fire,
    zone,
)

MADE = datetime(2026, 1, 5, 8, 0, 0, tzinfo=UTC)
RULES = Rules(min_interval=60.0, per_agent=20)
BERLIN = zone("Europe/Berlin")


def fires(cron: Cron, after: datetime, count: int) -> list[datetime]:
    found: list[datetime] = []
    for _ in range(count):
        upcoming = next_fire(cron, MADE, after)
        assert upcoming is not None
        found.append(upcoming)
        after = upcoming
    return found


def test_a_daily_cron_keeps_its_wall_clock_time_across_the_spring_change() -> None:
    """Berlin moves from UTC+1 to UTC+2 on 2026-03-29: 09:00 is 08:00 UTC, then 07:00."""
    daily = Cron("0 9 * * *", "Europe/Berlin")
    found = fires(daily, datetime(2026, 3, 27, 12, tzinfo=UTC), 3)
    assert [f.astimezone(BERLIN).hour for f in found] == [9, 9, 9]
    assert found == [
        datetime(2026, 3, 28, 8, tzinfo=UTC),
        datetime(2026, 3, 29, 7, tzinfo=UTC),
        datetime(2026, 3, 30, 7, tzinfo=UTC),
    ]


def test_a_daily_cron_keeps_its_wall_clock_time_across_the_autumn_change() -> None:
    daily = Cron("0 9 * * *", "Europe/Berlin")
    found = fires(daily, datetime(2026, 10, 24, 12, tzinfo=UTC), 2)
    assert found == [datetime(2026, 10, 25, 8, tzinfo=UTC), datetime(2026, 10, 26, 8, tzinfo=UTC)]


def test_a_time_in_the_skipped_hour_fires_when_the_clock_jumps() -> None:
    """02:30 does not exist in Berlin on 2026-03-29: the fire comes at 03:00 local."""
    nightly = Cron("30 2 * * *", "Europe/Berlin")
    found = fires(nightly, datetime(2026, 3, 28, 12, tzinfo=UTC), 2)
    assert found == [
        datetime(2026, 3, 29, 1, 0, tzinfo=UTC),
        datetime(2026, 3, 30, 0, 30, tzinfo=UTC),
    ]


def test_a_time_in_the_repeated_hour_fires_once() -> None:
    """02:30 happens twice in Berlin on 2026-10-25; the schedule fires at the first."""
    nightly = Cron("30 2 * * *", "Europe/Berlin")
    found = fires(nightly, datetime(2026, 10, 24, 12, tzinfo=UTC), 2)
    assert found == [
        datetime(2026, 10, 25, 0, 30, tzinfo=UTC),
        datetime(2026, 10, 26, 1, 30, tzinfo=UTC),
    ]


def test_every_counts_from_when_the_schedule_was_made_without_drifting() -> None:
    every = Every(2.0)
    assert next_fire(every, MADE, MADE) == MADE + timedelta(seconds=2)
    late = MADE + timedelta(seconds=2, milliseconds=40)
    assert next_fire(every, MADE, late) == MADE + timedelta(seconds=4)


def test_a_late_fire_counts_the_fires_it_stands_for() -> None:
    every = Every(2.0)
    planned = MADE + timedelta(seconds=2)
    assert missed(every, MADE, planned, planned + timedelta(milliseconds=30)) == 0
    assert missed(every, MADE, planned, planned + timedelta(seconds=10, milliseconds=5)) == 5
    hourly = Cron("0 * * * *")
    noon = datetime(2026, 1, 5, 12, tzinfo=UTC)
    assert missed(hourly, MADE, noon, noon + timedelta(hours=3, minutes=1)) == 3


def test_an_instant_fires_once() -> None:
    once = At(MADE + timedelta(hours=1))
    assert next_fire(once, MADE, MADE) == once.at
    assert next_fire(once, MADE, once.at) is None


@pytest.mark.parametrize(
    ("text", "seconds"), [("90s", 90), ("5m", 300), ("1h30m", 5400), ("2d", 172800)]
)
def test_durations_read_as_people_write_them(text: str, seconds: float) -> None:
    assert duration(text) == seconds


@pytest.mark.parametrize(
    ("when", "words"),
    [
        (Every(5.0), "at most every 60 s"),
        (Cron("* * * * * *"), "needs five fields"),
        (Cron("61 * * * *"), "cannot be read"),
        (Cron("0 9 * * *", "Mars/Olympus"), "time zone 'Mars/Olympus' is not known"),
        (Cron("0 9 30 2 *"), "cannot be read"),
        (At(MADE - timedelta(seconds=1)), "is past"),
        (Every(1e300), "at most 3660 days ahead"),
        (Every(float("inf")), "at most 3660 days ahead"),
        (Every(float("nan")), "at most 3660 days ahead"),
        (At(datetime(9999, 12, 31, tzinfo=UTC)), "at most 3660 days ahead"),
    ],
)
def test_a_schedule_that_cannot_be_made_says_why(when: Every | Cron | At, words: str) -> None:
    with pytest.raises(ScheduleError, match=words):
        check(ScheduleSpec("hello", when), MADE, RULES)


def test_a_cron_expression_firing_more_often_than_allowed_is_refused() -> None:
    with pytest.raises(ScheduleError, match="more often than every 120 s"):
        check(ScheduleSpec("hi", Cron("*/1 * * * *")), MADE, Rules(120.0, 20))


@pytest.mark.parametrize("text", ["", "5", "1m1h", "ten minutes", "1.5h"])
def test_a_duration_that_cannot_be_read_says_what_is_accepted(text: str) -> None:
    with pytest.raises(ScheduleError, match="90s, 5m, 1h30m or 2d"):
        duration(text)


@pytest.mark.parametrize("text", ["99999999999999d", "9999999d", "3661d"])
def test_a_duration_past_the_horizon_is_refused_before_any_date_is_computed(text: str) -> None:
    with pytest.raises(ScheduleError, match="at most 3660 days ahead"):
        duration(text)
