"""The time a query is about: "in May 2023", "last week", "yesterday", "3 days ago", "2022-05-08".

:func:`find_time_window` turns the first time expression of a query into a half-open UTC
window ``[start, end)`` relative to "now" (the memory's clock), or None. Recall's focus step
(``nodes/refine.py``) raises memories whose time (``occurred_at``, stored as ``created_at``)
falls inside it. Rules, not a model, so the limits are plain: English expressions only;
expressions anchored on another event ("the week before the trip") are not resolved; a month
without a year is the latest such month not after now ("in May" asked in March means last May).
Libraries such as dateparser find a moment, not the span a question covers, and weigh
~10 MB: the few patterns a memory query uses are written out here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

MONTHS = {
    name: number
    for number, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ),
        start=1,
    )
    for name in names
}
NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "a few": 3}
_MONTH = "|".join(sorted(MONTHS, key=len, reverse=True))
_ISO_DATE = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
# "May" and "March" are also words: a month counts after a preposition, before a day or a year.
_MONTH_PHRASE = re.compile(
    rf"(?:\b(?P<lead>in|last|this|since|during|of|from|around|early|late|mid|on|by|until|before|after)\s+(?:the\s+)?)?"
    rf"\b(?P<month>{_MONTH})\.?\b(?:\s+(?P<day>\d{{1,2}})(?:st|nd|rd|th)?\b)?(?:,?\s+(?P<year>(?:19|20)\d\d)\b)?",
    re.IGNORECASE,
)
_DAY_MONTH = re.compile(
    rf"\b(?P<day>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<month>{_MONTH})\b,?\s*(?P<year>(?:19|20)\d\d)?",
    re.IGNORECASE,
)
_YEAR = re.compile(r"\b(?:in|during|of|since|year)\s+((?:19|20)\d\d)\b|\b((?:19|20)\d\d)\b", re.IGNORECASE)
_AGO = re.compile(
    r"\b(\d+|an?|one|two|three|four|five|six|a few)\s+(day|week|month|year)s?\s+ago\b", re.IGNORECASE
)
_RELATIVE = re.compile(r"\b(last|this|past|previous)\s+(weekend|week|month|year)\b", re.IGNORECASE)
_DAY_WORDS = re.compile(r"\b(yesterday|today|tonight|last night|this morning)\b", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class TimeWindow:
    """A half-open UTC span ``[start, end)`` and the words it came from."""

    start: datetime
    end: datetime
    phrase: str

    def contains(self, moment: datetime) -> bool:
        moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
        return self.start <= moment < self.end

    def __str__(self) -> str:
        return f"{self.phrase!r} [{self.start.date()} .. {self.end.date()})"


def _at(day: date) -> datetime:
    return datetime.combine(day, time(), tzinfo=UTC)


def _days(first: date, count: int, phrase: str) -> TimeWindow:
    return TimeWindow(_at(first), _at(first + timedelta(days=count)), phrase)


def _month(year: int, month: int, phrase: str) -> TimeWindow:
    following = date(year + (month == 12), month % 12 + 1, 1)
    return TimeWindow(_at(date(year, month, 1)), _at(following), phrase)


def _year(year: int, phrase: str) -> TimeWindow:
    return TimeWindow(_at(date(year, 1, 1)), _at(date(year + 1, 1, 1)), phrase)


def _latest_month(month: int, today: date, strictly_before: bool) -> int:
    """The year of the latest ``month`` not after today (before this month with ``strictly_before``)."""
    if month < today.month or (month == today.month and not strictly_before):
        return today.year
    return today.year - 1


def _months_back(today: date, months: int) -> tuple[int, int]:
    index = today.year * 12 + today.month - 1 - months
    return index // 12, index % 12 + 1


def _iso(query: str) -> TimeWindow | None:
    match = _ISO_DATE.search(query)
    if not match:
        return None
    try:
        day = date(int(match[1]), int(match[2]), int(match[3]))
    except ValueError:
        return None
    return _days(day, 1, match[0])


def _calendar(query: str, today: date) -> TimeWindow | None:
    """ "8 May 2023", "May 8, 2023", "in May 2023", "last May", "in May" (a month needs context)."""
    match = _DAY_MONTH.search(query)
    if match:
        month = MONTHS[match["month"].lower()]
        year = int(match["year"]) if match["year"] else _latest_month(month, today, False)
        try:
            return _days(date(year, month, int(match["day"])), 1, match[0].strip())
        except ValueError:
            return None
    for match in _MONTH_PHRASE.finditer(query):
        word = match["month"]
        if not (match["lead"] or match["day"] or match["year"]):
            continue  # "May I ...", "march on": not a date
        if word.lower() in {"may", "march"} and word[0].islower() and not match["year"]:
            continue
        month = MONTHS[word.lower()]
        lead = (match["lead"] or "").lower()
        year = int(match["year"]) if match["year"] else _latest_month(month, today, lead == "last")
        if match["day"]:
            try:
                return _days(date(year, month, int(match["day"])), 1, match[0].strip())
            except ValueError:
                continue
        return _month(year, month, match[0].strip())
    return None


def _relative(query: str, today: date) -> TimeWindow | None:
    match = _DAY_WORDS.search(query)
    if match:
        word = match[1].lower()
        back = 1 if word in {"yesterday", "last night"} else 0
        return _days(today - timedelta(days=back), 1, match[0])
    match = _AGO.search(query)
    if match:
        raw = match[1].lower()
        count = int(raw) if raw.isdigit() else NUMBERS.get(raw, 1)
        unit = match[2].lower()
        if unit == "day":
            return _days(today - timedelta(days=count + 1), 3, match[0])  # a day either side
        if unit == "week":
            return _days(today - timedelta(days=7 * count + 3), 7, match[0])
        if unit == "month":
            return _month(*_months_back(today, count), match[0])
        return _year(today.year - count, match[0])
    match = _RELATIVE.search(query)
    if match:
        which, unit = match[1].lower(), match[2].lower()
        this = which == "this"
        if unit == "weekend":
            saturday = today - timedelta(days=(today.weekday() - 5) % 7)  # the latest Saturday
            if not this and today.weekday() >= 5:
                saturday -= timedelta(days=7)  # asked on a weekend: the one before
            return _days(saturday, 2, match[0])
        if unit == "week":
            monday = today - timedelta(days=today.weekday())
            return _days(monday if this else monday - timedelta(days=7), 7, match[0])
        if unit == "month":
            return _month(*_months_back(today, 0 if this else 1), match[0])
        return _year(today.year - (0 if this else 1), match[0])
    return None


def _bare_year(query: str, today: date) -> TimeWindow | None:
    """ "in 2022", "2021": a number far in the future is a port or a count, not a year."""
    for match in _YEAR.finditer(query):
        year = int(match[1] or match[2])
        if year <= today.year + 1:
            return _year(year, match[0])
    return None


def find_time_window(query: str, now: datetime) -> TimeWindow | None:
    """The window of the first time expression in ``query`` (most specific rule first), or None."""
    today = (now if now.tzinfo else now.replace(tzinfo=UTC)).astimezone(UTC).date()
    return _iso(query) or _calendar(query, today) or _relative(query, today) or _bare_year(query, today)
