"""Answer-type cues: what kind of fact a question asks for, and whether a sentence supplies one.

"How long …?" is answered by a duration, "How often …?" by a frequency, "How much …?" by a number,
"When …?" by a date or a time. A sentence of the right type that also names the question's subject
is evidence even when the chunk around it is about a dozen other things.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

_WHEN = re.compile(r"\b(what time|when|which day|what day|what date|by when|deadline)\b|什么时候|几点|哪天|何时", re.I)
_DATE_OR_TIME = re.compile(
    r"\b\d{1,2}:\d{2}\b|\b\d{1,2}\s*(am|pm)\b|\b(mon|tues|wednes|thurs|fri|satur|sun)day\b|\b(january|february|"
    r"march|april|may|june|july|august|september|october|november|december)\b|\b(19|20)\d{2}\b|\bQ[1-4]\b"
    r"|\b(before|after|within|by|until|every)\b.{0,40}\b(day|week|month|year|ride|release|deploy|shift)s?\b"
    r"|\d+\s*(点|日|月|号)",
    re.I,
)
# "When …?" is often a condition ("when does legal review a contract?" — above $100,000); these are not:
_WHAT_DAY = re.compile(r"\b(what time|which day|what day|what date|which date)\b|几点|哪天", re.I)
_HOW_LONG = re.compile(r"\bhow (long|soon|quickly|fast)\b|多久|多长时间|多快", re.I)
_DURATION = re.compile(
    r"\d+(\.\d+)?(?:\s*|-)(seconds?|secs?|minutes?|mins?|hours?|hrs?|days?|business days?|working days?|weeks?|"
    r"months?|years?|business hours|working hours|characters|digits)\b"
    r"|\b(one|two|three|four|five|six|seven|eight|nine|ten|twelve)(?:\s+|-)(minutes?|hours?|days?|weeks?|months?|years?)\b"
    r"|\d+\s*个?(工作日|天|小时|分钟|周|星期|个月|月|年)",
    re.I,
)
_HOW_OFTEN = re.compile(r"\bhow often\b|\bhow frequently\b|多久一次|多频繁|每隔多久", re.I)
_FREQUENCY = re.compile(
    r"\b(every|each|daily|weekly|monthly|quarterly|annually|yearly|hourly|once|twice|per (day|week|month|"
    r"year|quarter))\b|\b\d+\s+times\b|每(天|周|月|年|次|季度)",
    re.I,
)
_HOW_MUCH = re.compile(
    r"\bhow (many|much)\b|\b(max|maximum|minimum|limit|price|cost|rate|budget|cap|allowance|percent(age)?)\b|多少|几",
    re.I,
)
_NUMBER = re.compile(
    r"\d|[一二三四五六七八九十百千万]|\b(one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|dozen"
    r"|(?:thir|four|fif|six|seven|eigh|nine)teen|(?:twen|thir|for|fif|six|seven|eigh|nine)ty|hundred|thousand"
    r"|million|billion)\b",
    re.I,
)

# Chinese may-I questions ("需要发票吗", "能报销吗", "是否…") are answered by a sentence that allows, requires or
# forbids (可/须/无需/不予…); whom-to-ask questions ("找谁") by one that names a contact or who decides.
CJK_MAY = re.compile(
    r"能不能|可不可以|可以[^，。？?]*吗|能[^，。？?]*吗|是否|允许|要不要|需不需要|需要[^，。？?]*吗|用不用"
)
CJK_RULING = re.compile(r"可以|可[^以]|不能|不得|禁止|不予|不接受|须|需要|无需|不需|一律|允许")
CJK_WHOM = re.compile(r"谁|哪个部门|哪位|联系人")
CJK_CONTACT = re.compile(r"联系|负责|专员|经理|审批|邮箱|@|HRBP|前台|财务组")

# (what the question asks, what a sentence answering it contains), most specific first.
CUES: tuple[tuple[re.Pattern[str], re.Pattern[str]], ...] = (
    (_HOW_OFTEN, _FREQUENCY),
    (_HOW_LONG, _DURATION),
    (_WHEN, _DATE_OR_TIME),
    (_HOW_MUCH, _NUMBER),
    (CJK_MAY, CJK_RULING),
    (CJK_WHOM, CJK_CONTACT),
)
# "What's the admin fee?", "what does starter cost?": only an amount of money (or "free") answers; a sentence
# about the plan that names no price does not.
# (The word names what is asked, not a thing it qualifies: "price controls", "cost centre" ask no price.)
_PRICE_ASKED = re.compile(
    r"^\W*(?:what|how much)\b.*\b(?:fees?|prices?|costs?|charges?)\b"
    r"(?=\s*(?:[?.!,]|$|(?:of|for|on|per|to|if|when|in|at|with|do|does|is|are|would|will)\b))",
    re.I,
)
_MONEY = re.compile(
    r"[$€£¥]\s?\d|\d\s?(?:%|percent|usd|eur|gbp|cny|rmb|dollars?|euros?|pounds?|cents?|元|块)"
    r"|\b(?:usd|eur|gbp|cny|rmb)\s?\d|\bfree\b|\bno (?:cost|charge|fee)\b|\bat cost\b|免费",
    re.I,
)
# "What kubernetes version …?": a version number ("1.29", "v2", "PostgreSQL 15"), not a count of days.
_VERSION_ASKED = re.compile(r"\bversions?\b|版本", re.I)
_VERSION = re.compile(
    r"\bv\d+(?:\.\d+)*\b|(?<![\w.-])\d+\.\d+(?:\.\d+)*(?![\w-])|\bversion\s+\d+"
    r"|\b[A-Z][\w+#]*\s+\d+(?:\.\d+)*(?![\w.-])(?!\s*%)",
)

# The questions that only a fact of their kind answers, and what that fact is called: "how much extra is
# heavy-goods routing?" is not answered by "available on request". (Not "how much" alone: "how much
# leave …" is answered by "16 weeks", a figure in words the number pattern may miss; "how many/much"
# stays, as the patterns read figures in words too.)
REQUIRED: tuple[tuple[re.Pattern[str], re.Pattern[str], str], ...] = (
    (_HOW_OFTEN, _FREQUENCY, "frequency"),
    (_HOW_LONG, _DURATION, "duration"),
    (_WHAT_DAY, _DATE_OR_TIME, "day, date or time"),
    (_VERSION_ASKED, _VERSION, "version"),
    (_PRICE_ASKED, _MONEY, "price"),
    (re.compile(r"\bhow (many|much)\b|多少", re.I), _NUMBER, "figure"),
)


# Asked once per evidence chunk a probe re-ranks and again when grading: the same question, a dozen times.
@lru_cache(maxsize=1024)
def expected_answers(question: str) -> tuple[re.Pattern[str], ...]:
    """The patterns a sentence answering `question` matches (() when the question asks for no type)."""
    return tuple(answer for asks, answer in CUES if asks.search(question))


def required_kind(question: str) -> tuple[str, re.Pattern[str] | None]:
    """The kind of fact only which answers the question, and its pattern (("", None) when any fact may)."""
    return next(((kind, answer) for asks, answer, kind in REQUIRED if asks.search(question)), ("", None))


def supplies(sentence: str, expected: Sequence[re.Pattern[str]]) -> bool:
    """Whether the sentence is of a type the question asks for (False when it asks for none)."""
    return bool(expected) and _supplies(sentence, tuple(expected))


# The probe's re-ranking and the grade measure the same answer units against the same question's patterns.
@lru_cache(maxsize=8192)
def _supplies(sentence: str, expected: tuple[re.Pattern[str], ...]) -> bool:
    return any(pattern.search(sentence) for pattern in expected)
