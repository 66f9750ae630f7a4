"""`jobs.*_cron` read as cron and the Kubernetes CronJob read them (scaleahead.cronexpr). Until
2026-12-07 APScheduler's `from_crontab` read day of week 0 as Monday (so `0 3 * * 0`, Sunday in
cron, ran on Mondays, and 7 was refused) and ANDed a restricted day of month with a restricted day
of week; an expression that never fires was accepted and silently never ran (a review)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from scaleahead.cronexpr import days_of_week, parse_cron
from scaleahead.errors import ConfigError
from scaleahead.settings import Settings

MONDAY = datetime(2026, 12, 7, tzinfo=UTC)  # a Monday, 00:00 UTC


def next_fires(expr: str, n: int = 3) -> list[str]:
    trigger, prev, now, out = parse_cron(expr), None, MONDAY, []
    for _ in range(n):
        fire = trigger.get_next_fire_time(prev, now)
        assert fire is not None
        out.append(fire.strftime("%a %d %H:%M"))
        prev, now = fire, fire.replace(second=1)
    return out


def test_day_of_week_zero_and_seven_are_sunday() -> None:
    assert next_fires("0 3 * * 0", 1) == ["Sun 13 03:00"]
    assert next_fires("0 3 * * 7", 1) == ["Sun 13 03:00"]
    assert next_fires("0 3 * * sun", 1) == ["Sun 13 03:00"]


def test_weekday_ranges_and_steps_follow_cron() -> None:
    assert next_fires("0 3 * * 1-5", 5) == [
        "Mon 07 03:00",
        "Tue 08 03:00",
        "Wed 09 03:00",
        "Thu 10 03:00",
        "Fri 11 03:00",
    ]
    assert days_of_week("mon-fri") == [1, 2, 3, 4, 5]
    assert days_of_week("5-7") == [0, 5, 6]  # Friday to Sunday
    assert days_of_week("*/2") == [0, 2, 4, 6]
    assert days_of_week("1,3,sat") == [1, 3, 6]


def test_a_day_of_month_and_a_day_of_week_fire_when_either_matches() -> None:
    # cron: the 1st of the month OR a Sunday (APScheduler alone: a 1st that is a Sunday)
    assert next_fires("0 3 1 * 0", 3) == ["Sun 13 03:00", "Sun 20 03:00", "Sun 27 03:00"]
    fires = next_fires("0 3 1 * 0", 6)
    assert "Fri 01 03:00" in fires  # 2027-01-01, a Friday


@pytest.mark.parametrize(("expr", "says"), [
    ("0 0 30 2 *", "never fires"),
    ("0 3 * * 8", "day of week 8 is not 0-7"),
    ("0 3 * *", "wrong number of fields"),
    ("0 3 * * fri-mon", "runs backwards"),
])  # fmt: skip
def test_an_expression_that_is_not_cron_or_never_fires_is_refused(
    expr: str, says: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SCALEAHEAD_JOBS__RETRAIN_CRON", expr)
    with pytest.raises(ConfigError) as err:
        Settings.from_env()
    assert "RETRAIN_CRON" in str(err.value) and says in str(err.value), str(err.value)


def test_the_daemons_jobs_use_crons_meaning() -> None:
    from scaleahead.daemon import cron

    fire = cron("0 3 * * 0", "jobs.retrain_cron").get_next_fire_time(None, MONDAY)
    assert fire is not None and fire.strftime("%a %d %H:%M") == "Sun 13 03:00"
