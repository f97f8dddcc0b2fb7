"""Dates in recall questions resolve against the session's anchor date (GVD: 2023)."""
from datetime import date

import pytest

from boundmem.caim.dates import parse_date_range

A = date(2023, 5, 7)  # a Sunday, the day after GVD's last session
D = date


@pytest.mark.parametrize("text,start,end", [
    ("On May 4th, I shared with you some problems I encountered.", D(2023, 5, 4), D(2023, 5, 4)),
    ("What did I do on April 27th?", D(2023, 4, 27), D(2023, 4, 27)),
    ("I mentioned on May 2nd that I went to the museum.", D(2023, 5, 2), D(2023, 5, 2)),
    ("on the 3rd of May", D(2023, 5, 3), D(2023, 5, 3)),
    ("what happened on 2023-04-30", D(2023, 4, 30), D(2023, 4, 30)),
    ("what about 5/1?", D(2023, 5, 1), D(2023, 5, 1)),
    ("What did I cook yesterday?", D(2023, 5, 6), D(2023, 5, 6)),
    ("the day before yesterday I ran", D(2023, 5, 5), D(2023, 5, 5)),
    ("three days ago", D(2023, 5, 4), D(2023, 5, 4)),
    ("A few days ago, I mentioned Green Wheat Park", D(2023, 4, 27), D(2023, 5, 5)),
    ("What did we talk about last week?", D(2023, 4, 24), D(2023, 4, 30)),  # Mon..Sun before the anchor's week
    ("last Monday", D(2023, 5, 1), D(2023, 5, 1)),
    ("last month", D(2023, 4, 1), D(2023, 4, 30)),
    ("December 24th", D(2022, 12, 24), D(2022, 12, 24)),  # no future dates: previous year
])
def test_phrases_resolve_to_ranges(text, start, end):
    r = parse_date_range(text, A)
    assert r is not None, text
    assert (r.start, r.end) == (start, end)


@pytest.mark.parametrize("text", ["What music do I like?", "May I ask you something?", "I recently went to Xiamen.",
                                  "Which movies did you share with me?"])
def test_no_date_named(text):
    assert parse_date_range(text, A) is None


def test_range_membership_is_inclusive():
    r = parse_date_range("a few days ago", A)
    assert r.start in r and r.end in r and A not in r
