"""Five-field cron expressions read as cron and the Kubernetes CronJob read them, in UTC.

APScheduler's ``CronTrigger.from_crontab`` differs from cron in two ways that matter here (a
review of 2026-12-07 found both in ``jobs.*_cron``): its day of week counts 0 as Monday, where cron
counts 0 (and 7) as Sunday, so ``0 3 * * 0`` ran on Mondays and ``7`` was refused; and it ANDs a
restricted day of month with a restricted day of week, where cron fires when either matches. This
module translates the day-of-week field into day names and builds the OR of two triggers when both
day fields are restricted. An expression that never fires (``0 0 30 2 *``) is refused.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.combining import OrTrigger
from apscheduler.triggers.cron import CronTrigger

#: Cron's day-of-week numbers (0 and 7: Sunday) as names, which APScheduler reads unambiguously.
_DAY_NAMES = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_DAY_NUMBER = {name: i for i, name in enumerate(_DAY_NAMES)}
_TOKEN = re.compile(r"^(\*|[a-z0-9]+(?:-[a-z0-9]+)?)(?:/(\d+))?$")


def _day(text: str) -> int:
    """One day of week: a cron number 0-7 (0 and 7 are Sunday) or a three-letter name."""
    if text.isdigit():
        value = int(text)
        if not 0 <= value <= 7:
            raise ValueError(f"day of week {text} is not 0-7 (0 and 7: Sunday)")
        return value % 7
    if text in _DAY_NUMBER:
        return _DAY_NUMBER[text]
    raise ValueError(f"day of week {text!r} is neither 0-7 nor sun, mon, ..., sat")


def days_of_week(field: str) -> list[int]:
    """The cron days (0 = Sunday) a day-of-week field names: ``*``, numbers, names, ranges
    (``1-5``, ``mon-fri``), steps (``*/2``, ``1-5/2``) and lists of them."""
    days: set[int] = set()
    for part in field.lower().split(","):
        match = _TOKEN.match(part.strip())
        if match is None:
            raise ValueError(f"day of week {part!r} is not a cron day-of-week item")
        span, step_text = match.groups()
        step = int(step_text) if step_text else 1
        if step < 1:
            raise ValueError(f"day of week {part!r} has step 0")
        if span == "*":
            first, last = 0, 6
        elif "-" in span:
            lo, hi = span.split("-")
            first = _day(lo)
            last = 7 if hi == "7" else _day(hi)  # 5-7: Friday to Sunday
            if last < first:
                raise ValueError(f"day of week range {span!r} runs backwards")
        else:
            first = _day(span)
            last = first if step == 1 else 6  # 1/2: from Monday every second day, as cron reads it
        days.update(d % 7 for d in range(first, last + 1, step))
    return sorted(days)


def parse_cron(expr: str) -> BaseTrigger:
    """A UTC trigger for the five-field cron ``expr`` with cron's meaning; ``ValueError`` if it is
    not one or never fires."""
    fields = expr.split()
    if len(fields) != 5:
        raise ValueError(f"wrong number of fields; got {len(fields)}, expected 5")
    minute, hour, dom, month, dow = fields
    names = ",".join(_DAY_NAMES[d] for d in days_of_week(dow))

    def trigger(day: str, day_of_week: str) -> CronTrigger:
        return CronTrigger(minute=minute, hour=hour, day=day, month=month, day_of_week=day_of_week, timezone=UTC)

    both = not dom.startswith("*") and not dow.startswith("*")
    result: BaseTrigger = OrTrigger([trigger(dom, "*"), trigger("*", names)]) if both else trigger(dom, names)
    if result.get_next_fire_time(None, datetime(2000, 1, 1, tzinfo=UTC)) is None:
        raise ValueError("it never fires (no such day in any month)")
    return result
