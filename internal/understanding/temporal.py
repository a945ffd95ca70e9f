"""Dates in text: relative and absolute expressions resolved against a reference time.

I/O-free. `dateparser` resolves an expression and tells its granularity (day, week,
month, year); this module finds the expressions, turns a granularity into a range
[start, end) (the convention of vectord's date filter), and writes anchored dates
("7 May 2023"). Weekends and "a couple of days ago", which dateparser does not
resolve, are computed here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone

from dateparser.date import DateDataParser

WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august",
          "september", "october", "november", "december")
_NUM = r"(?:\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|a couple of|couple of)"
_UNIT = r"(?:day|week|month|year|weekend)s?"
_WD = "|".join(WEEKDAYS)

# Relative expressions a dialogue turn anchors ("yesterday" said on 8 May 2023).
RELATIVE = re.compile(
    r"\b(?:the day before yesterday|the day after tomorrow|yesterday|today|tonight|tomorrow"
    rf"|(?:last|this|next) (?:night|morning|afternoon|evening)"
    rf"|(?:this past|last|this|next|past) (?:{_WD}|week|weekend|month|year)"
    rf"|{_NUM} {_UNIT} ago"
    rf"|(?:in|within) {_NUM} {_UNIT}"
    rf"|(?:on )?(?:{_WD})(?= (?:night|morning|afternoon|evening)\b)"
    r")\b",
    re.IGNORECASE,
)

# Absolute expressions a question may bound itself by ("in May 2023", "in 2022").
_MONTH = "|".join(m for m in MONTHS) + r"|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec"
ABSOLUTE = re.compile(
    rf"\b(?:\d{{1,2}}(?:st|nd|rd|th)? (?:of )?(?:{_MONTH})\.?,? \d{{4}}"
    rf"|(?:{_MONTH})\.? \d{{1,2}}(?:st|nd|rd|th)?,? \d{{4}}"
    rf"|(?:{_MONTH})\.?,? \d{{4}}"
    r"|\d{4}-\d{2}-\d{2}"
    r"|(?:19|20)\d{2})\b",
    re.IGNORECASE,
)

# "before X" / "after X" / "since X" / "until X" bound a range on one side.
_OPERATOR = re.compile(r"\b(before|after|since|until|till|by)\s+$", re.IGNORECASE)

# Words that say a text talks about time (a cue for temporal questions).
TIME_CUE = re.compile(
    rf"\b(?:{_WD}|{_MONTH}|yesterday|today|tonight|tomorrow|weekend|ago|last (?:week|month|year|night)"
    r"|next (?:week|month|year)|(?:19|20)\d{2})\b",
    re.IGNORECASE,
)


class DateError(ValueError):
    """A timestamp that does not parse."""


def parse_instant(value: str) -> datetime:
    """An ISO-8601 date or date-time; the wall-clock time it names, without zone."""
    text = value.strip()
    if not text:
        raise DateError("empty timestamp")
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
    except ValueError:
        raise DateError(f"not an ISO-8601 date or date-time: {value!r}") from None
    return dt.replace(tzinfo=None)


def utc_now() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


@dataclass(frozen=True)
class Resolved:
    """One expression resolved: the range it covers ([start, end)) and its granularity."""
    expression: str
    start: date
    end: date
    period: str  # day | week | month | year


def _range(day: date, period: str) -> tuple[date, date]:
    if period == "week":
        start = day - timedelta(days=day.weekday())
        return start, start + timedelta(days=7)
    if period == "month":
        start = day.replace(day=1)
        nxt = date(start.year + (start.month == 12), start.month % 12 + 1, 1)
        return start, nxt
    if period == "year":
        return date(day.year, 1, 1), date(day.year + 1, 1, 1)
    return day, day + timedelta(days=1)


def _parser(ref: datetime) -> DateDataParser:
    return DateDataParser(languages=["en"], settings={
        "RELATIVE_BASE": ref, "PREFER_DATES_FROM": "past", "RETURN_TIME_AS_PERIOD": True,
        "STRICT_PARSING": False})


_WEEKEND = re.compile(r"^(?:(this past|last|the|this|next) )?weekend$", re.IGNORECASE)
_PERIOD_OF = re.compile(r"^(?:the )?(week|month|year) of (.+)$", re.IGNORECASE)
_COUPLE = re.compile(r"^(?:a )?couple of (day|week|month|year)s? ago$", re.IGNORECASE)


def _special(expr: str, ref: datetime) -> Resolved | None:
    """What dateparser leaves unresolved: weekends and 'a couple of days ago'."""
    day = ref.date()
    m = _WEEKEND.match(expr)
    if m:
        which = (m.group(1) or "the").lower()
        if which in ("last", "this past", "the"):
            sat = day - timedelta(days=((day.weekday() - 5) % 7) or 7)
        else:  # this / next: the coming one
            sat = day + timedelta(days=((5 - day.weekday()) % 7) or 7)
        return Resolved(expr, sat, sat + timedelta(days=2), "weekend")
    m = _COUPLE.match(expr)
    if m:
        unit = m.group(1).lower()
        delta = {"day": timedelta(days=2), "week": timedelta(weeks=2),
                 "month": timedelta(days=61), "year": timedelta(days=730)}[unit]
        start, end = _range(day - delta, unit)
        return Resolved(expr, start, end, unit)
    return None


def resolve(expression: str, ref: datetime) -> Resolved | None:
    """The range an expression names, or None when it names none ('before the wedding')."""
    expr = " ".join(expression.split())
    expr = re.sub(r"^(?:on|in|during|at) ", "", expr, flags=re.IGNORECASE)
    special = _special(expr, ref)
    if special is not None:
        return special
    m = _PERIOD_OF.match(expr)
    if m:  # "the week of 22 May 2023": the day, widened to its week
        inner = resolve(m.group(2), ref)
        if inner is None:
            return None
        start, end = _range(inner.start, m.group(1).lower())
        return Resolved(expr, start, end, m.group(1).lower())
    data = _parser(ref).get_date_data(expr)
    if data.date_obj is None:
        return None
    period = {"time": "day", "part_of_day": "day"}.get(str(data.period), str(data.period))
    if period not in ("day", "week", "month", "year"):
        period = "day"
    start, end = _range(data.date_obj.date(), period)
    return Resolved(expr, start, end, period)


def phrase(r: Resolved) -> str:
    """How an anchored expression reads in text: 'on 7 May 2023', 'in May 2023', ..."""
    if r.period == "week":
        return f"in the week of {fmt_day(r.start)}"
    if r.period == "weekend":
        return f"on the weekend of {fmt_day(r.start)}"
    if r.period == "month":
        return f"in {r.start.strftime('%B')} {r.start.year}"
    if r.period == "year":
        return f"in {r.start.year}"
    return f"on {fmt_day(r.start)}"


def fmt_day(d: date) -> str:
    return f"{d.day} {d.strftime('%B')} {d.year}"


@dataclass(frozen=True)
class Range:
    start: date | None
    end: date | None
    relative: str | None  # the expression as written, when it was relative to `now`


def query_range(text: str, now: datetime, spans: list[tuple[int, int]] | None = None) -> Range | None:
    """The time range a question is bounded by, or None.

    Candidates are the relative and absolute expressions found here plus `spans`
    (e.g. the pipeline's DATE entities). An operator before one ("before May 2023")
    bounds one side; one that does not resolve gives no range at all.
    """
    found: list[tuple[int, int]] = [m.span() for m in RELATIVE.finditer(text)]
    found += [m.span() for m in ABSOLUTE.finditer(text)]
    found += spans or []
    # Longest first; an expression inside one that resolved is not counted twice, but
    # one inside an expression that did not resolve ("the summer of 2022") still is.
    resolved: list[tuple[tuple[int, int], Resolved]] = []
    for a, b in sorted(set(found), key=lambda s: -(s[1] - s[0])):
        if any(a < y and x < b for (x, y), _ in resolved):
            continue
        r = resolve(text[a:b], now)
        if r is not None:
            resolved.append(((a, b), r))
    start: date | None = None
    end: date | None = None
    relative: list[str] = []
    for (a, b), r in sorted(resolved, key=lambda x: x[0]):
        expr = text[a:b]
        op = _OPERATOR.search(text[:a])
        kind = op.group(1).lower() if op else ""
        if kind in ("before", "until", "till", "by"):
            end = r.start if end is None else min(end, r.start)
        elif kind in ("after", "since"):
            lo = r.end if kind == "after" else r.start
            start = lo if start is None else max(start, lo)
        else:
            start = r.start if start is None else min(start, r.start)
            end = r.end if end is None else max(end, r.end)
        if RELATIVE.fullmatch(expr.strip()) or RELATIVE.search(expr):
            relative.append(expr)
    if (start is None and end is None) or (start is not None and end is not None
                                              and start >= end):
        return None  # nothing, or bounds that contradict each other: no range
    return Range(start, end, ", ".join(relative) or None)
