"""Resolve the time a recall question points at ("on May 4th", "a few days ago") into a date range.

CAIM narrows tag-matched thoughts by timestamp. Users name dates the way people talk, relative to the day
they are talking, so everything is resolved against an anchor date (the session's "today"). Absolute dates
without a year take the anchor's year, moved back a year if that would put them in the future (people
recall the past). Ranges are inclusive. Vague words ("recently", "lately", "the other day") are not
dates: as a hard filter they would drop exactly the memories people mean by them. Rules, in the order tried (the first match wins):

| phrase                                   | range                                   |
|------------------------------------------|-----------------------------------------|
| 2023-05-04, May 4th, 4th of May, 4 May    | that day                                |
| 5/4 (US month/day)                        | that day                                |
| the day before yesterday                  | anchor - 2                              |
| yesterday / last night                    | anchor - 1                              |
| today / this morning / tonight            | anchor                                  |
| N days ago (N as digit or word)           | anchor - N                              |
| a few / several / a couple of days ago    | anchor - 10 .. anchor - 2 (people stretch it) |
| last week                                 | Monday..Sunday of the previous week     |
| this week                                 | Monday of this week .. anchor           |
| last <weekday> / on <weekday>             | the most recent such day before anchor  |
| last month                                | the whole previous calendar month       |
| in May / in April (month alone)           | that month                              |
"""
from __future__ import annotations

import calendar
import re
from datetime import date, timedelta
from typing import Optional

from pydantic import BaseModel

MONTHS = {m.lower(): i for i, m in enumerate(calendar.month_name) if m}
MONTHS.update({m.lower(): i for i, m in enumerate(calendar.month_abbr) if m})
MONTHS["sept"] = 9
WEEKDAYS = {d.lower(): i for i, d in enumerate(calendar.day_name)}
NUMBER_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
                "ten": 10}

_MON = r"(?P<mon>" + "|".join(sorted(MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_ISO = re.compile(r"\b(?P<y>\d{4})-(?P<m>\d{1,2})-(?P<d>\d{1,2})\b")
_MON_DAY = re.compile(rf"\b{_MON}\s+(?:the\s+)?{_DAY}\b", re.I)
_DAY_MON = re.compile(rf"\b(?:the\s+)?{_DAY}\s+(?:of\s+)?{_MON}\b", re.I)
_SLASH = re.compile(r"(?<![\d/])(?P<m>1[0-2]|0?[1-9])/(?P<d>[0-3]?\d)(?![\d/])")
_N_DAYS_AGO = re.compile(r"\b(?P<n>\d+|" + "|".join(NUMBER_WORDS) + r")\s+days?\s+ago\b", re.I)
_FEW_DAYS = re.compile(r"\b(?:a\s+few|few|several|a\s+couple\s+of|couple\s+of)\s+days\s+(?:ago|back|before)\b", re.I)
_WEEKDAY = re.compile(r"\b(?:last|on|this\s+past|past)\s+(?P<wd>" + "|".join(WEEKDAYS) + r")\b", re.I)
_IN_MONTH = re.compile(rf"\bin\s+{_MON}(?!\s+[0-3]?\d)\b", re.I)


class DateRange(BaseModel):
    start: date
    end: date
    phrase: str = ""

    def __contains__(self, d: object) -> bool:
        return isinstance(d, date) and self.start <= d <= self.end


def _day(y: int, m: int, d: int) -> Optional[date]:
    try:
        return date(y, m, d)
    except ValueError:
        return None


def _no_future(d: Optional[date], anchor: date) -> Optional[date]:
    if d is not None and d > anchor:
        return _day(d.year - 1, d.month, d.day) or d
    return d


def _one(d: Optional[date], phrase: str) -> Optional[DateRange]:
    return DateRange(start=d, end=d, phrase=phrase) if d else None


def parse_date_range(text: str, anchor: date) -> Optional[DateRange]:
    """The day or days `text` refers to, or None when it names no time."""
    t = text.lower()
    if m := _ISO.search(t):
        return _one(_day(int(m["y"]), int(m["m"]), int(m["d"])), m.group(0))
    for rx in (_MON_DAY, _DAY_MON):
        if m := rx.search(t):
            d = _day(anchor.year, MONTHS[m["mon"].lower()], int(m["day"]))
            if d:
                return _one(_no_future(d, anchor), m.group(0))
    if m := _SLASH.search(t):
        d = _day(anchor.year, int(m["m"]), int(m["d"]))
        if d:
            return _one(_no_future(d, anchor), m.group(0))
    if "day before yesterday" in t:
        return _one(anchor - timedelta(days=2), "the day before yesterday")
    if m := re.search(r"\b(yesterday|last night)\b", t):
        return _one(anchor - timedelta(days=1), m.group(0))
    if m := re.search(r"\b(today|this morning|this afternoon|this evening|tonight)\b", t):
        return _one(anchor, m.group(0))
    if m := _N_DAYS_AGO.search(t):
        n = int(m["n"]) if m["n"].isdigit() else NUMBER_WORDS[m["n"].lower()]
        return _one(anchor - timedelta(days=n), m.group(0))
    if m := _FEW_DAYS.search(t):
        return DateRange(start=anchor - timedelta(days=10), end=anchor - timedelta(days=2), phrase=m.group(0))
    if m := re.search(r"\blast week\b", t):
        monday = anchor - timedelta(days=anchor.weekday() + 7)
        return DateRange(start=monday, end=monday + timedelta(days=6), phrase=m.group(0))
    if m := re.search(r"\bthis week\b", t):
        return DateRange(start=anchor - timedelta(days=anchor.weekday()), end=anchor, phrase=m.group(0))
    if m := _WEEKDAY.search(t):
        back = (anchor.weekday() - WEEKDAYS[m["wd"].lower()]) % 7 or 7
        return _one(anchor - timedelta(days=back), m.group(0))
    if m := re.search(r"\blast month\b", t):
        end = anchor.replace(day=1) - timedelta(days=1)
        return DateRange(start=end.replace(day=1), end=end, phrase=m.group(0))
    if m := _IN_MONTH.search(t):
        mon = MONTHS[m["mon"].lower()]
        if mon in (5, 3, 8) and m["mon"].lower() in ("may", "mar", "aug"):
            # "may"/"mar"/"aug" are also ordinary words; accept only the capitalised month name
            if not re.search(rf"\bin {m['mon'].capitalize()}\b", text):
                return None
        year = anchor.year if mon <= anchor.month else anchor.year - 1
        last = calendar.monthrange(year, mon)[1]
        return DateRange(start=date(year, mon, 1), end=date(year, mon, last), phrase=m.group(0))
    return None
