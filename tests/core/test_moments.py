"""core.moments: the one parser of moments and durations (issue 35, "once each")."""

from __future__ import annotations

import datetime
import time

import pytest

from todo_sessions.core.moments import Moment, duration_ms, parse_duration, parse_moment

NOW = 1_764_000_000_000  # 2025-11-24T16:00:00Z
DAY = 86_400_000


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("30s", 30_000),
        ("30m", 1_800_000),
        ("2h", 7_200_000),
        ("7d", 7 * DAY),
        ("1w", 7 * DAY),
        (" 90 d ", 90 * DAY),
        ("0m", 0),
    ],
)
def test_durations(text: str, ms: int) -> None:
    assert parse_duration(text) == ms
    assert parse_moment(text, now_ms=NOW) == Moment(NOW - ms, True)


@pytest.mark.parametrize(
    "text", ["", "d", "7", "-1d", "1.5h", "7days", "7D", "1y", "1234567890123d"]
)
def test_not_durations(text: str) -> None:
    with pytest.raises(ValueError, match=r"^must be a duration such as 30m, 2h, 7d, 1w, got "):
        parse_duration(text)


def test_a_duration_reaching_before_the_year_1_is_refused() -> None:
    with pytest.raises(ValueError, match=r"^reaches back before the year 1, got '999999999999w'$"):
        parse_moment("999999999999w", now_ms=NOW)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-12-01", datetime.datetime(2026, 12, 1, tzinfo=datetime.UTC)),
        ("2026-12-01T09:30", datetime.datetime(2026, 12, 1, 9, 30, tzinfo=datetime.UTC)),
        ("2026-12-01T09:30Z", datetime.datetime(2026, 12, 1, 9, 30, tzinfo=datetime.UTC)),
        (
            "2026-12-01T09:30+02:00",
            datetime.datetime(2026, 12, 1, 7, 30, tzinfo=datetime.UTC),
        ),
        ("0001-01-01", datetime.datetime(1, 1, 1, tzinfo=datetime.UTC)),
    ],
)
def test_dates_and_times_without_an_offset_are_utc(text: str, expected: datetime.datetime) -> None:
    assert parse_moment(text, now_ms=NOW) == Moment(int(expected.timestamp() * 1000), False)


def test_local_time_where_the_caller_asks(monkeypatch: pytest.MonkeyPatch) -> None:
    if not hasattr(time, "tzset"):
        pytest.skip("no tzset on this platform")
    monkeypatch.setenv("TZ", "Asia/Kolkata")  # UTC+05:30, no daylight saving
    time.tzset()
    try:
        local = parse_moment("2026-12-01T09:30", now_ms=NOW, local=True)
        utc = parse_moment("2026-12-01T09:30", now_ms=NOW)
        assert utc.ms - local.ms == 5.5 * 3_600_000 and not local.ago
        # an offset wins over the local zone
        assert parse_moment("2026-12-01T09:30Z", now_ms=NOW, local=True) == utc
    finally:
        monkeypatch.undo()  # the zone this process had
        time.tzset()


@pytest.mark.parametrize("text", ["yesterday", "2026-13-01", "12/01/2026", "", "2026-12-01 junk"])
def test_not_moments(text: str) -> None:
    with pytest.raises(ValueError, match=r"^must be a date or time \(.*UTC without one\) or a"):
        parse_moment(text, now_ms=NOW)
    with pytest.raises(ValueError, match=r"local time without one"):
        parse_moment(text, now_ms=NOW, local=True)


@pytest.mark.parametrize("text", ["0001-01-01T00:00+01:00", "9999-12-31T23:59:59-01:00"])
def test_moments_outside_the_years_1_to_9999(text: str) -> None:
    with pytest.raises(ValueError, match=r"^is out of range, got "):
        parse_moment(text, now_ms=NOW)


def test_duration_ms_takes_a_timedelta_or_ms() -> None:
    assert duration_ms(datetime.timedelta(days=2, milliseconds=5)) == 2 * DAY + 5
    assert duration_ms(0) == 0 and duration_ms(1500) == 1500
    for bad in (-1, 1.5, True, "90d", None):
        with pytest.raises(TypeError, match=r"^must be a timedelta or an int of ms >= 0"):
            duration_ms(bad)  # type: ignore[arg-type]
