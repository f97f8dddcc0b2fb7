"""parse_date_range pinned over a table of phrases and two anchors (a Sunday in 2023, a Wednesday in leap-year March).

Every row is (text, expected) with expected = (start, end, phrase) or None when the text names no date. The
second anchor checks the year rules: month-days after the anchor fall back a year, last month of a leap March.
"""
import re
from datetime import date as D

import pytest

from boundmem.caim.dates import parse_date_range

A = D(2023, 5, 7)    # Sunday
B = D(2024, 3, 13)   # Wednesday, leap year

A_ROWS = [
    ('On May 4th, I shared with you some problems I encountered.', (D(2023, 5, 4), D(2023, 5, 4), 'may 4th')),
    ('What did I do on April 27th?', (D(2023, 4, 27), D(2023, 4, 27), 'april 27th')),
    ('I mentioned on May 2nd that I went to the museum.', (D(2023, 5, 2), D(2023, 5, 2), 'may 2nd')),
    ('on the 3rd of May', (D(2023, 5, 3), D(2023, 5, 3), 'the 3rd of may')),
    ('the 4th of July', (D(2022, 7, 4), D(2022, 7, 4), 'the 4th of july')),
    ('4 May', (D(2023, 5, 4), D(2023, 5, 4), '4 may')),
    ('what happened on 2023-04-30', (D(2023, 4, 30), D(2023, 4, 30), '2023-04-30')),
    ('on 2022-12-31 we met', (D(2022, 12, 31), D(2022, 12, 31), '2022-12-31')),
    ('what about 5/1?', (D(2023, 5, 1), D(2023, 5, 1), '5/1')),
    ('on 12/24 I baked', (D(2022, 12, 24), D(2022, 12, 24), '12/24')),
    ('December 24th', (D(2022, 12, 24), D(2022, 12, 24), 'december 24th')),
    ('Dec 24', (D(2022, 12, 24), D(2022, 12, 24), 'dec 24')),
    ('sept 3rd', (D(2022, 9, 3), D(2022, 9, 3), 'sept 3rd')),
    ('Sep. 3', (D(2022, 9, 3), D(2022, 9, 3), 'sep. 3')),
    ('Jan 31st', (D(2023, 1, 31), D(2023, 1, 31), 'jan 31st')),
    ('May 7th', (D(2023, 5, 7), D(2023, 5, 7), 'may 7th')),
    ('May 8th', (D(2022, 5, 8), D(2022, 5, 8), 'may 8th')),
    ('what did I say on march 3rd', (D(2023, 3, 3), D(2023, 3, 3), 'march 3rd')),
    ('on March 3rd', (D(2023, 3, 3), D(2023, 3, 3), 'march 3rd')),
    ('What did I cook yesterday?', (D(2023, 5, 6), D(2023, 5, 6), 'yesterday')),
    ('yesterday evening', (D(2023, 5, 6), D(2023, 5, 6), 'yesterday')),
    ('last night', (D(2023, 5, 6), D(2023, 5, 6), 'last night')),
    ('the day before yesterday I ran', (D(2023, 5, 5), D(2023, 5, 5), 'the day before yesterday')),
    ('day before yesterday', (D(2023, 5, 5), D(2023, 5, 5), 'the day before yesterday')),
    ('today', (D(2023, 5, 7), D(2023, 5, 7), 'today')),
    ('this morning I was tired', (D(2023, 5, 7), D(2023, 5, 7), 'this morning')),
    ('this afternoon', (D(2023, 5, 7), D(2023, 5, 7), 'this afternoon')),
    ('this evening', (D(2023, 5, 7), D(2023, 5, 7), 'this evening')),
    ('tonight', (D(2023, 5, 7), D(2023, 5, 7), 'tonight')),
    ('three days ago', (D(2023, 5, 4), D(2023, 5, 4), 'three days ago')),
    ('3 days ago', (D(2023, 5, 4), D(2023, 5, 4), '3 days ago')),
    ('one day ago', (D(2023, 5, 6), D(2023, 5, 6), 'one day ago')),
    ('ten days ago', (D(2023, 4, 27), D(2023, 4, 27), 'ten days ago')),
    ('2 days ago', (D(2023, 5, 5), D(2023, 5, 5), '2 days ago')),
    ('two days ago', (D(2023, 5, 5), D(2023, 5, 5), 'two days ago')),
    ('A few days ago, I mentioned Green Wheat Park', (D(2023, 4, 27), D(2023, 5, 5), 'a few days ago')),
    ('several days ago', (D(2023, 4, 27), D(2023, 5, 5), 'several days ago')),
    ('a couple of days ago', (D(2023, 4, 27), D(2023, 5, 5), 'a couple of days ago')),
    ('couple of days back', (D(2023, 4, 27), D(2023, 5, 5), 'couple of days back')),
    ('few days before', (D(2023, 4, 27), D(2023, 5, 5), 'few days before')),
    ('What did we talk about last week?', (D(2023, 4, 24), D(2023, 4, 30), 'last week')),
    ('this week', (D(2023, 5, 1), D(2023, 5, 7), 'this week')),
    ('last Monday', (D(2023, 5, 1), D(2023, 5, 1), 'last monday')),
    ('last Tuesday', (D(2023, 5, 2), D(2023, 5, 2), 'last tuesday')),
    ('last Sunday', (D(2023, 4, 30), D(2023, 4, 30), 'last sunday')),
    ('on Friday', (D(2023, 5, 5), D(2023, 5, 5), 'on friday')),
    ('on Sunday', (D(2023, 4, 30), D(2023, 4, 30), 'on sunday')),
    ('on saturday', (D(2023, 5, 6), D(2023, 5, 6), 'on saturday')),
    ('this past Wednesday', (D(2023, 5, 3), D(2023, 5, 3), 'this past wednesday')),
    ('past Thursday', (D(2023, 5, 4), D(2023, 5, 4), 'past thursday')),
    ('last month', (D(2023, 4, 1), D(2023, 4, 30), 'last month')),
    ('in May', (D(2023, 5, 1), D(2023, 5, 31), 'in may')),
    ('in March', (D(2023, 3, 1), D(2023, 3, 31), 'in march')),
    ('in December', (D(2022, 12, 1), D(2022, 12, 31), 'in december')),
    ('in June', (D(2022, 6, 1), D(2022, 6, 30), 'in june')),
    ('in Sept', (D(2022, 9, 1), D(2022, 9, 30), 'in sept')),
    ('in March 5 I think', (D(2023, 3, 5), D(2023, 3, 5), 'march 5')),
]
B_ROWS = [
    ('On May 4th, I shared with you some problems I encountered.', (D(2023, 5, 4), D(2023, 5, 4), 'may 4th')),
    ('What did I do on April 27th?', (D(2023, 4, 27), D(2023, 4, 27), 'april 27th')),
    ('I mentioned on May 2nd that I went to the museum.', (D(2023, 5, 2), D(2023, 5, 2), 'may 2nd')),
    ('on the 3rd of May', (D(2023, 5, 3), D(2023, 5, 3), 'the 3rd of may')),
    ('the 4th of July', (D(2023, 7, 4), D(2023, 7, 4), 'the 4th of july')),
    ('4 May', (D(2023, 5, 4), D(2023, 5, 4), '4 may')),
    ('what happened on 2023-04-30', (D(2023, 4, 30), D(2023, 4, 30), '2023-04-30')),
    ('on 2022-12-31 we met', (D(2022, 12, 31), D(2022, 12, 31), '2022-12-31')),
    ('what about 5/1?', (D(2023, 5, 1), D(2023, 5, 1), '5/1')),
    ('on 12/24 I baked', (D(2023, 12, 24), D(2023, 12, 24), '12/24')),
    ('December 24th', (D(2023, 12, 24), D(2023, 12, 24), 'december 24th')),
    ('Dec 24', (D(2023, 12, 24), D(2023, 12, 24), 'dec 24')),
    ('sept 3rd', (D(2023, 9, 3), D(2023, 9, 3), 'sept 3rd')),
    ('Sep. 3', (D(2023, 9, 3), D(2023, 9, 3), 'sep. 3')),
    ('Jan 31st', (D(2024, 1, 31), D(2024, 1, 31), 'jan 31st')),
    ('May 7th', (D(2023, 5, 7), D(2023, 5, 7), 'may 7th')),
    ('May 8th', (D(2023, 5, 8), D(2023, 5, 8), 'may 8th')),
    ('what did I say on march 3rd', (D(2024, 3, 3), D(2024, 3, 3), 'march 3rd')),
    ('on March 3rd', (D(2024, 3, 3), D(2024, 3, 3), 'march 3rd')),
    ('What did I cook yesterday?', (D(2024, 3, 12), D(2024, 3, 12), 'yesterday')),
    ('yesterday evening', (D(2024, 3, 12), D(2024, 3, 12), 'yesterday')),
    ('last night', (D(2024, 3, 12), D(2024, 3, 12), 'last night')),
    ('the day before yesterday I ran', (D(2024, 3, 11), D(2024, 3, 11), 'the day before yesterday')),
    ('day before yesterday', (D(2024, 3, 11), D(2024, 3, 11), 'the day before yesterday')),
    ('today', (D(2024, 3, 13), D(2024, 3, 13), 'today')),
    ('this morning I was tired', (D(2024, 3, 13), D(2024, 3, 13), 'this morning')),
    ('this afternoon', (D(2024, 3, 13), D(2024, 3, 13), 'this afternoon')),
    ('this evening', (D(2024, 3, 13), D(2024, 3, 13), 'this evening')),
    ('tonight', (D(2024, 3, 13), D(2024, 3, 13), 'tonight')),
    ('three days ago', (D(2024, 3, 10), D(2024, 3, 10), 'three days ago')),
    ('3 days ago', (D(2024, 3, 10), D(2024, 3, 10), '3 days ago')),
    ('one day ago', (D(2024, 3, 12), D(2024, 3, 12), 'one day ago')),
    ('ten days ago', (D(2024, 3, 3), D(2024, 3, 3), 'ten days ago')),
    ('2 days ago', (D(2024, 3, 11), D(2024, 3, 11), '2 days ago')),
    ('two days ago', (D(2024, 3, 11), D(2024, 3, 11), 'two days ago')),
    ('A few days ago, I mentioned Green Wheat Park', (D(2024, 3, 3), D(2024, 3, 11), 'a few days ago')),
    ('several days ago', (D(2024, 3, 3), D(2024, 3, 11), 'several days ago')),
    ('a couple of days ago', (D(2024, 3, 3), D(2024, 3, 11), 'a couple of days ago')),
    ('couple of days back', (D(2024, 3, 3), D(2024, 3, 11), 'couple of days back')),
    ('few days before', (D(2024, 3, 3), D(2024, 3, 11), 'few days before')),
    ('What did we talk about last week?', (D(2024, 3, 4), D(2024, 3, 10), 'last week')),
    ('this week', (D(2024, 3, 11), D(2024, 3, 13), 'this week')),
    ('last Monday', (D(2024, 3, 11), D(2024, 3, 11), 'last monday')),
    ('last Tuesday', (D(2024, 3, 12), D(2024, 3, 12), 'last tuesday')),
    ('last Sunday', (D(2024, 3, 10), D(2024, 3, 10), 'last sunday')),
    ('on Friday', (D(2024, 3, 8), D(2024, 3, 8), 'on friday')),
    ('on Sunday', (D(2024, 3, 10), D(2024, 3, 10), 'on sunday')),
    ('on saturday', (D(2024, 3, 9), D(2024, 3, 9), 'on saturday')),
    ('this past Wednesday', (D(2024, 3, 6), D(2024, 3, 6), 'this past wednesday')),
    ('past Thursday', (D(2024, 3, 7), D(2024, 3, 7), 'past thursday')),
    ('last month', (D(2024, 2, 1), D(2024, 2, 29), 'last month')),
    ('in May', (D(2023, 5, 1), D(2023, 5, 31), 'in may')),
    ('in March', (D(2024, 3, 1), D(2024, 3, 31), 'in march')),
    ('in December', (D(2023, 12, 1), D(2023, 12, 31), 'in december')),
    ('in June', (D(2023, 6, 1), D(2023, 6, 30), 'in june')),
    ('in Sept', (D(2023, 9, 1), D(2023, 9, 30), 'in sept')),
    ('in March 5 I think', (D(2024, 3, 5), D(2024, 3, 5), 'march 5')),
]

NO_DATE = [  # vague words, ordinary words that look like months, numbers that are not days
    'in may',
    'in aug we drove',
    'What music do I like?',
    'May I ask you something?',
    'I recently went to Xiamen.',
    'Which movies did you share with me?',
    'lately I listen to jazz',
    'the other day I ate sushi',
    'play jazz',
    'set the temperature to 21',
    "I'm going to the 4th store",
    'we march on',
    'I may go',
    'we met on the 3rd',
    '21 degrees please',
]


def _check(text, anchor, expected):
    r = parse_date_range(text, anchor)
    got = None if r is None else (r.start, r.end, r.phrase)
    assert got == expected, text


@pytest.mark.parametrize("text,expected", A_ROWS)
def test_phrases_against_a_sunday(text, expected):
    _check(text, A, expected)


@pytest.mark.parametrize("text,expected", B_ROWS)
def test_phrases_against_a_leap_year_wednesday(text, expected):
    _check(text, B, expected)


@pytest.mark.parametrize("anchor", [A, B])
@pytest.mark.parametrize("text", NO_DATE)
def test_no_date_named(text, anchor):
    _check(text, anchor, None)


@pytest.mark.parametrize("anchor", [D(2023, 1, 1), D(2023, 5, 7), D(2024, 2, 29), D(2024, 12, 31)])
def test_no_range_ends_after_the_anchor_or_starts_after_it_ends(anchor):
    for text, _ in A_ROWS:
        r = parse_date_range(text, anchor)
        # an explicit year is taken as said; "in <this month>" is the whole month
        if r is not None and not re.search(r"\d{4}", text) and not text.lower().startswith("in "):
            assert r.start <= r.end <= anchor, (text, anchor, r)


@pytest.mark.parametrize("text,expected", [
    ("I left two days ago", (D(2023, 5, 5), D(2023, 5, 5), "two days ago")),
    ("about two days ago", (D(2023, 5, 5), D(2023, 5, 5), "two days ago")),
    ("we ate sushi three days ago, I think", (D(2023, 5, 4), D(2023, 5, 4), "three days ago")),
    ("may the 4th", (D(2023, 5, 4), D(2023, 5, 4), "may the 4th")),
    ("in Feb", (D(2023, 2, 1), D(2023, 2, 28), "in feb")),
    ("11/31", None), ("Feb 29", None), ("2023-02-30", None), ("lately, two weeks ago", None),
])
def test_more_phrases_as_before(text, expected):
    _check(text, A, expected)


@pytest.mark.parametrize("text,expected", [
    # dateparser reads any day count said in words (the old table stopped at ten and read "twenty one" as one)
    ("twenty one days ago", (D(2023, 4, 16), D(2023, 4, 16), "twenty one days ago")),
    ("twenty-one days ago", (D(2023, 4, 16), D(2023, 4, 16), "twenty-one days ago")),
    ("twelve days ago", (D(2023, 4, 25), D(2023, 4, 25), "twelve days ago")),
    ("a day ago", (D(2023, 5, 6), D(2023, 5, 6), "a day ago")),
])
def test_day_counts_in_words(text, expected):
    _check(text, A, expected)
