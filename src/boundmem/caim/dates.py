"""Resolve the time a recall question points at ("on May 4th", "a few days ago") into a date range.

CAIM narrows tag-matched thoughts by timestamp. Users name dates the way people talk, relative to the day
they are talking, so everything is resolved against an anchor date (the session's "today"). Absolute dates
without a year take the anchor's year, moved back a year if that would put them in the future (people
recall the past). Ranges are inclusive. Vague words ("recently", "lately", "the other day") are not
dates: as a hard filter they would drop exactly the memories people mean by them.

dateparser resolves every phrase (relative to the anchor, past preferred, US month/day) and says whether it
names a day, a week or a month. Our grammar only spots the phrase first, because dateparser's own search
finds dates in ordinary words ("we", "May I", "the 4th store") and would make them hard filters. Rules, in
the order tried (the first phrase dateparser resolves wins):

| phrase                                   | range                                   |
|------------------------------------------|-----------------------------------------|
| 2023-05-04, May 4th, 4th of May, 4 May    | that day                                |
| 5/4 (US month/day)                        | that day                                |
| the day before yesterday                  | anchor - 2                              |
| yesterday / last night                    | anchor - 1                              |
| today / this morning / tonight            | anchor                                  |
| N days ago (N as digit or word)           | anchor - N                              |
| a few / several / a couple of days ago    | anchor - 10 .. anchor - 2 (ours: a vague span dateparser leaves unread) |
| last week                                 | Monday..Sunday of the previous week     |
| this week                                 | Monday of this week .. anchor           |
| last / on / (this) past <weekday>         | the most recent such day before anchor  |
| last month                                | the whole previous calendar month       |
| in May / in April (month alone)           | that month ("in may/mar/aug" only capitalised: ours, they are also words) |
"""
from __future__ import annotations

import calendar
import re
from datetime import date, datetime, timedelta
from typing import Optional

from dateparser.date import DateDataParser
from pydantic import BaseModel
from text_to_num import text2num

MONTHS = {m.lower(): i for i, m in enumerate(calendar.month_name) if m}
MONTHS.update({m.lower(): i for i, m in enumerate(calendar.month_abbr) if m})
MONTHS["sept"] = 9
WEEKDAYS = {d.lower(): i for i, d in enumerate(calendar.day_name)}

_MON = r"(?P<mon>" + "|".join(sorted(MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_FEW_DAYS = re.compile(r"\b(?:a\s+few|few|several|a\s+couple\s+of|couple\s+of)\s+days\s+(?:ago|back|before)\b", re.I)
_IN_MONTH = re.compile(rf"\bin\s+{_MON}(?!\s+[0-3]?\d)\b", re.I)
_AMBIGUOUS_MONTHS = ("may", "mar", "aug")
# the phrases we let dateparser read, in the order tried
_PHRASES = [re.compile(rx, re.I) for rx in (
    r"\b\d{4}-\d{1,2}-\d{1,2}\b",
    rf"\b{_MON}\s+(?:the\s+)?{_DAY}\b",
    rf"\b(?:the\s+)?{_DAY}\s+(?:of\s+)?{_MON}\b",
    r"(?<![\d/])(?:1[0-2]|0?[1-9])/[0-3]?\d(?![\d/])",
    r"\bday before yesterday\b",
    r"\b(?:yesterday|last night)\b",
    r"\b(?:today|this morning|this afternoon|this evening|tonight)\b",
    r"\b(?:(?P<tens>[a-z]+)[\s-])?(?P<n>\d+|[a-z]+)\s+days?\s+ago\b",
    _FEW_DAYS.pattern,
    r"\blast week\b",
    r"\bthis week\b",
    r"\b(?:last|on|this\s+past|past)\s+(?:" + "|".join(WEEKDAYS) + r")\b",
    r"\blast month\b",
    _IN_MONTH.pattern)]


class DateRange(BaseModel):
    start: date
    end: date
    phrase: str = ""

    def __contains__(self, d: object) -> bool:
        return isinstance(d, date) and self.start <= d <= self.end


def _resolve(phrase: str, anchor: date) -> Optional[tuple[date, str]]:
    """(day, period) that dateparser reads in `phrase` on the anchor's day; period is day, week or month."""
    settings = {"RELATIVE_BASE": datetime(anchor.year, anchor.month, anchor.day), "PREFER_DATES_FROM": "past",
                "DATE_ORDER": "MDY", "RETURN_AS_TIMEZONE_AWARE": False, "PARSERS": ["relative-time", "absolute-time"]}
    # dateparser reads "last <weekday>" but not "past <weekday>"
    text = re.sub(r"^(?:this\s+)?past\s+", "last ", phrase)
    found = DateDataParser(languages=["en"], settings=settings).get_date_data(text)
    if not found or not found.date_obj:
        return None
    day = found.date_obj.date()
    if not re.search(r"\d{4}|ago", phrase) and not anchor - timedelta(days=366) < day <= anchor:
        return None   # ours: a date said without a year is within the year before (dateparser reads "11/31" as 1931)
    return day, found.period or "day"


def _is_number(words: str) -> bool:
    try:
        text2num(words, "en")
        return True
    except ValueError:
        return False


def _range(day: date, period: str, anchor: date) -> tuple[date, date]:
    if period == "week":   # Monday..Sunday, never past the anchor ("this week" ends today)
        monday = day - timedelta(days=day.weekday())
        return monday, min(monday + timedelta(days=6), anchor)
    if period == "month":
        return day.replace(day=1), day.replace(day=calendar.monthrange(day.year, day.month)[1])
    return day, day


def parse_date_range(text: str, anchor: date) -> Optional[DateRange]:
    """The day or days `text` refers to, or None when it names no time."""
    t = text.lower()
    for rx in _PHRASES:
        m = rx.search(t)
        if not m:
            continue
        phrase = m.group(0)
        if "tens" in rx.groupindex and m["tens"] and not _is_number(f"{m['tens']} {m['n']}"):
            phrase = phrase[m.start("n") - m.start():]   # "I left two days ago": the number is "two"
        if rx.pattern == _FEW_DAYS.pattern:   # ours: people stretch "a few days" well past three
            return DateRange(start=anchor - timedelta(days=10), end=anchor - timedelta(days=2), phrase=phrase)
        if rx.pattern == _IN_MONTH.pattern and m["mon"] in _AMBIGUOUS_MONTHS \
                and not re.search(rf"\bin {m['mon'].capitalize()}\b", text):
            return None   # ours: "may"/"mar"/"aug" are also ordinary words; only the capitalised month counts
        if found := _resolve(phrase, anchor):
            start, end = _range(*found, anchor)
            return DateRange(start=start, end=end, phrase="the " + phrase if phrase.startswith("day ") else phrase)
    return None
