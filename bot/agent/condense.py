"""Condense: thread history + new message → one standalone query.

Offline, a follow-up is recognised by its shape (a pronoun, a leading connective such as "and for",
"what about", 那/还有, or too few content words to stand alone). It is then completed from the most
recent user turn: pronouns are replaced by that turn's main subject, and the turn's key terms are
added — except the ones the follow-up replaces ("employees" when it now asks about "contractors").
Self-contained questions are returned unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import numpy as np
from pydantic import BaseModel

from bot.agent.messages import is_fixed_reply
from bot.agent.models import Turn
from tools.text import STOPWORDS, cjk_content_words, cjk_names, cjk_words, content_terms, has_cjk, raw_tokens

MAX_HISTORY_TURNS = 8

_CONNECTIVE = re.compile(
    r"^\s*(?:and|but|also|so|or|ok(?:ay)?|then|what about|how about|and what about|and how about|"
    r"what if|same for|and for|and in|and on|and the|and if|what of)\b[\s,]*",
    re.I,
)
_CJK_CONNECTIVE = re.compile(r"^\s*(?:那么|那|还有|另外|而且|然后|如果是)[，,\s]*")
_PRONOUNS = {
    "it",
    "its",
    "they",
    "them",
    "their",
    "theirs",
    "this",
    "that",
    "these",
    "those",
    "he",
    "him",
    "his",
    "she",
    "her",
    "hers",
    "there",
    "one",
    "ones",
    # "what should we watch until it's done?": a pronoun inside a contraction is still the pronoun.
    "it's",
    "it’s",
    "that's",
    "that’s",
    "they're",
    "they’re",
}
# "Is there a limit?" refers to nothing: existential "there" is not the pronoun "there"
# ("what's the office like there?").
_EXISTENTIAL_THERE = re.compile(
    r"\b(?:is|are|was|were|will|would|be)\s+there\b|\bthere\s+(?:is|are|was|were|be|will|would|has|have|had)\b|\bthere['’]s\b",
    re.I,
)
# A pronoun's word after a determiner names a thing: "and the it call?" asks about the IT call.
_AFTER_DETERMINER = r"(?<!\bthe\s)(?<!\ba\s)(?<!\ban\s)(?<!\bmy\s)(?<!\bour\s)(?<!\byour\s)"
_SUBJECT_PRONOUNS = re.compile(_AFTER_DETERMINER + r"\b(it|they|them|he|she|him|her|this|that)\b", re.I)
_POSSESSIVE_PRONOUNS = re.compile(_AFTER_DETERMINER + r"\b(its|their|his|her)\b", re.I)
_CJK_PRONOUN = re.compile(r"(它们|它|他们|她们|(?<![其])他|她|这个|那个|其(?![他它余]))")  # 其他城市: other cities
# A Chinese follow-up: one that adds a condition ("如果超过90天呢？"), ends on 呢 ("当天往返的呢？"), or has no
# subject of its own — no noun of two characters or more ("什么时候充到卡里？", "丢了怎么办").
_CJK_CONDITION = re.compile(r"^\s*(?:如果|要是|万一|假如)")
_CJK_SUBJECT_TAGS = ("n", "ns", "nt", "nz", "vn", "nrt", "nr")
_CJK_ENDS_ELLIPSIS = re.compile(r"呢\s*[？?。]*\s*$")
# A follow-up that asks its own question (a question word of its own) takes the previous question's subject,
# not the previous question: "午餐补贴每天多少钱？" then "什么时候充到卡里？" asks when, not how much.
_CJK_ASKS = re.compile(r"什么|多少|几|谁|哪|怎么|如何|多久|吗|是否|能不能|可不可以|要不要")
_QUESTION_WORDS = {
    "what",
    "how",
    "when",
    "where",
    "who",
    "whom",
    "which",
    "why",
    "much",
    "many",
    "long",
    "does",
    "do",
    "did",
    "is",
    "are",
    "can",
    "could",
    "should",
    "would",
    "will",
    # Contractions: "what's the learning budget?" carried "what's" as if it were a term.
    "what's",
    "whats",
    "how's",
    "who's",
    "where's",
    "when's",
}
# Proper-noun-ish phrases: capitalised words not at a sentence start, e.g. "Anna Vissi", "Shanghai office".
_CAPITALISED = re.compile(r"(?<![.!?]\s)(?<!^)\b([A-Z][\w'’-]+(?:\s+(?:of|the|de|van|von)?\s*[A-Z][\w'’-]+)*)")


# A follow-up that asks what happens next: "and if I don't?", "what if not?", "and then?", "what if I miss it?".
_NOT = r"(?:don['’]?t|do not|doesn['’]?t|does not|didn['’]?t|can['’]?t|cannot|won['’]?t|couldn['’]?t|not)"
_WHAT_NEXT = re.compile(
    r"^\s*(?:and|but|so|ok(?:ay)?)?[\s,]*(?:what\s+)?(?:if|when)\s+"
    rf"(?:i|we|you|they|he|she|it|someone|nobody|no one)?\s*(?:{_NOT}|miss|fail|forget)\b"
    # "what happens after?" asks for the next step; "what happens after the last one fails?" names its own event.
    r"|\bwhat happens (?:next|then|if not)\b|\bwhat happens after(?:wards| that| this)?\s*[?.!]*$"
    r"|\b(?:and|what happens) then\b|\bthen what\b"
    r"|\bwhat(?:['’]s| is| comes) next\b|\bif not\b",
    re.I,
)
# "if I don't", "if not": the condition the follow-up adds ends there; its verb is the previous question's.
_BARE_NEGATION = re.compile(rf"\b{_NOT}\s*[?.!]*\s*$", re.I)
# A follow-up that only adds a condition to the previous question ("what about after five years?",
# "and during the probation period?"): the previous question, with the condition added.
_CONDITION = re.compile(
    r"^(?:after|before|during|within|without|with|once|until|beyond|past|over|under|in the|on the|outside|while)\b",
    re.I,
)
_NUMBER = (
    r"(?:\d+(?:[.,]\d+)?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty|a few)"
)
# What a "what/which/how many" question asks about: "What pressure should I pump…" → "pressure".
_ASKED_ABOUT = re.compile(
    r"^\s*(?:what|which|how many|how much)\s+((?:[\w'’-]+\s+){0,2}?[\w'’-]+)\s+"
    r"(?:should|do|does|did|is|are|was|were|can|could|will|would|must|has|have|am)\b",
    re.I,
)


_MODALS = frozenset(["need", "needs", "have", "has", "must", "required", "supposed", "allowed", "able"])


# The Chinese shapes: "如果没到呢？", "超出了怎么办？", "没休完怎么办", "然后呢？".
_CJK_WHAT_NEXT = re.compile(
    r"^\s*(?:那么?|那)?[，,\s]*(?:如果|要是|万一|假如)?[^，。？?]{0,6}(?:不|没|未|忘|超过|超出|逾期)[^，。？?]{0,8}"
    r"(?:呢|怎么办|会怎样|怎么样|会怎么样)\s*[？?]?\s*$|然后呢|之后呢|接下来(?:呢|怎么办|做什么)"
)
_CJK_SEQUENCE = re.compile(r"然后|之后|接下来")


def asks_what_next(question: str) -> bool:
    """Whether a message asks what happens next or otherwise ("and if I don't?", "then what?", "如果没到呢？")."""
    return bool(_WHAT_NEXT.search(question)) or (has_cjk(question) and bool(_CJK_WHAT_NEXT.search(question)))


_SEQUENCE = re.compile(r"\b(?:then|next|after(?:wards)?)\b", re.I)


def what_next_kind(question: str) -> str:
    """ "then" for the next step ("and then what?", "what's next?"), "otherwise" for what happens if not ("and if
    I don't?"), "" for a question that asks neither."""
    if not asks_what_next(question):
        return ""
    if has_cjk(question):
        return "then" if _CJK_SEQUENCE.search(question) else "otherwise"
    return "then" if _SEQUENCE.search(question) and not re.search(r"\bif\b", question, re.I) else "otherwise"


def asked_about(question: str) -> str | None:
    """The thing a what/which/how-many question asks about, when it says so plainly ("pressure")."""
    match = _ASKED_ABOUT.match(question)
    if not match:
        return None
    words = [w for w in match.group(1).split() if w.lower() not in STOPWORDS and w.lower() not in _QUESTION_WORDS]
    return " ".join(words) or None


def _quantified(words: Sequence[str], text: str) -> set[str]:
    """The words counted by a number in `text` ("five years" → years): a measure, not a thing."""
    return {w for w in words if re.search(rf"\b{_NUMBER}\s+{re.escape(w)}\b", text, re.I)}


class CondensedQuery(BaseModel):
    standalone_query: str


def content_words(text: str) -> list[str]:
    """Surface words that carry meaning (not stopwords, not question words), in order, deduplicated."""
    seen: dict[str, None] = {}
    for token in raw_tokens(text):
        if has_cjk(token) or (token not in STOPWORDS and token not in _QUESTION_WORDS and len(token) > 1):
            seen.setdefault(token, None)
    return list(seen)


# "which quarter is the biggest?": a comparison of what the thread has been asking about.
_COMPARISON = re.compile(
    r"\b(?:biggest|largest|highest|lowest|smallest|cheapest|longest|shortest|best|worst|most|least|bigger|larger|"
    r"higher|lower|smaller|cheaper|longer|shorter|better|worse)\b",
    re.I,
)
MAX_COMPARISON_WORDS = 2


def compares(question: str) -> bool:
    """Whether a short question only compares ("which one is bigger?", "which quarter is the biggest?")."""
    return bool(_COMPARISON.search(question)) and len(content_words(question)) <= MAX_COMPARISON_WORDS


def pronouns_in(text: str) -> list[str]:
    """The pronouns of a message: not existential "there", not a pronoun's word after a determiner ("the it call")."""
    tokens = raw_tokens(_EXISTENTIAL_THERE.sub(" ", text))
    return [
        t
        for i, t in enumerate(tokens)
        if t in _PRONOUNS and (i == 0 or tokens[i - 1] not in _DETERMINERS or t == "one")
    ]


# "unrelated, but …", "different topic: …", "btw …": the message says itself that it starts a new question.
_TOPIC_SWITCH = re.compile(
    r"^\s*(?:(?:ok(?:ay)?|so|and|also|anyway|right)[\s,]+)?(?:unrelated|(?:on\s+)?(?:a\s+)?(?:different|separate|another|new|other)\s+(?:topic|question|thing)|"
    r"off[\s-]topic|btw|by the way|changing (?:the )?(?:topic|subject))\b[\s,:;.!—–-]*(?:but\b[\s,]*)?",
    re.I,
)


def switches_topic(question: str) -> bool:
    """Whether a message says it asks something new ("unrelated, but what vpn do I use?")."""
    match = _TOPIC_SWITCH.match(question)
    return bool(match) and bool(question[match.end() :].strip(" ?"))


# Words that point back to what was just said: "what happens to the photos taken meanwhile?", "and if they upgrade
# instead?", "does that apply to contractors too?".
_POINTS_BACK = re.compile(
    r"\b(?:meanwhile|in the meantime|in that case|in the same way|afterwards)\b"
    r"|\b(?:instead|too|as well|either)\s*[?.!]*$",
    re.I,
)
# "how early do I have to file the form?" after an answer about the Work From Anywhere form: a definite noun the thread
# has just used is the thing it used it for.
_DEFINITE = re.compile(r"\bthe\s+((?:[\w'’-]+\s+){0,2}[\w'’-]+)", re.I)


# A question that says this much is about what it says ("could you shed light on the key aspects of…").
MAX_POINTING_WORDS = 5


def refers_back(question: str, history: Sequence[Turn]) -> bool:
    """Whether a message points at what the thread just said: a word that points back, or a definite noun phrase
    ("the form") whose words the latest question or answer used."""
    if _POINTS_BACK.search(question):
        return True
    if main_subject(question) or len(content_words(question)) > MAX_POINTING_WORDS:
        return False  # "…the power wielded by the Prime Minister's office?" names what it asks about
    said = set()
    for turn in history[-2:] if history else []:
        said |= {w for w in raw_tokens(turn.text) if w not in STOPWORDS}
    for match in _DEFINITE.finditer(question):
        words = [w for w in raw_tokens(match.group(1)) if w not in STOPWORDS and w not in _QUESTION_WORDS]
        if words and words[0] in said:
            return True
    return False


# "even on weekends?", "per month?", "during probation?": a phrase with no verb and no question word that only
# qualifies what was just asked; "in berlin?" is a fragment too, but one word was a follow-up already.
_FRAGMENT = re.compile(
    r"^\s*(?:even|only|just|still|also)?\s*(?:per|on|at|in|during|over|under|for|from|until|till|by|before|after|"
    r"within|without|with|outside|including|excluding)\s+\S",
    re.I,
)


def is_fragment(question: str) -> bool:
    """Whether a message is a bare qualifying phrase ("even on weekends?", "per month or per year?")."""
    tokens = raw_tokens(question)
    return (
        bool(_FRAGMENT.match(question))
        and not any(t in _WH_WORDS for t in tokens)
        and len(content_words(question)) <= MAX_SUBSTITUTION_WORDS
    )


_WH_WORDS = frozenset(["what", "how", "when", "where", "who", "whom", "which", "why", "whats", "what's"])


# "do i need to do anything?" after "what does error E-12 mean?", "do we have to file something?": whether one must do
# something is asked about the thread's thing, which the question does not name again.
_ASKS_DUTY = re.compile(
    r"^\s*(?:and|so|but)?[\s,]*(?:do|does|will|would|should|must)\s+(?:i|we|you)\s+(?:(?:still|also|then)\s+)?"
    r"(?:need|have)\b",
    re.I,
)
_DUTY_WORDS = frozenset(["need", "needs", "have", "anything", "something", "first", "also", "still"])
# A duty question that says this much of its own is about what it says.
MAX_DUTY_WORDS = 2


def asks_duty_of_thread(question: str) -> bool:
    """Whether a message asks what one must do without naming what about ("do i need to show anything?")."""
    own = [w for w in content_words(question) if w not in _DUTY_WORDS]
    return bool(_ASKS_DUTY.match(question)) and len(own) <= MAX_DUTY_WORDS


def is_follow_up(question: str) -> bool:
    if switches_topic(question):
        return False
    if (
        _CORRECTION.match(question)
        or _CONNECTIVE.match(question)
        or _CJK_CONNECTIVE.match(question)
        or compares(question)
    ):
        return True
    if not has_cjk(question) and asks_what_next(question) and len(content_words(question)) <= 2:  # "what's next?"
        return True
    if has_cjk(question):
        return bool(_CJK_PRONOUN.search(question)) or len(question.strip()) <= 6 or _cjk_elliptic(question)
    if is_fragment(question):
        return True
    if pronouns_in(question):
        return not _states_then_asks(question)
    return len(content_words(question)) <= 1


# "A customer is getting unroutable_address back from the API - what does that mean?": a message that first says
# what happened, then asks about it; its pronoun points at its own first clause, not at the thread.
_STATED_THEN_ASKED = re.compile(r"^(?P<stated>[^?]+?)\s*(?:\s[-–—]\s|[,;:])\s*(?P<asked>[^,;:]+\?*)$")


def _states_then_asks(question: str) -> bool:
    match = _STATED_THEN_ASKED.match(question.strip())
    return (
        bool(match)
        and not pronouns_in(match["stated"])
        and len(content_words(match["stated"])) >= MIN_OWN_QUESTION_WORDS
        and _asks_own_question(match["asked"])
    )


_NAME_PHRASE = re.compile(r"\b([A-Z][\w'’-]+(?:\s+(?:of|the|de|van|von)?\s*[A-Z][\w'’-]+)+)")


def main_subject(text: str) -> str | None:
    """The most salient noun phrase of a turn: a proper-noun phrase if there is one, else None.
    A multi-word name may start the sentence ("Anna Vissi early life"); a single word may not."""
    candidates = [m.group(1) for m in _CAPITALISED.finditer(text) if m.group(1).lower() not in STOPWORDS]
    candidates += [
        m.group(1)
        for m in _NAME_PHRASE.finditer(text)
        if m.group(1).split()[0].lower() not in _QUESTION_WORDS | STOPWORDS
    ]
    return max(candidates, key=len) if candidates else None


def condense_offline(
    question: str,
    history: Sequence[Turn],
    similarity: Callable[[list[str], list[str]], np.ndarray] | None = None,
) -> str:
    """Heuristic condensing. `similarity(a, b)` (word-embedding cosines, |a|×|b|) finds replaced terms."""
    question = question.strip()
    history = list(history[-MAX_HISTORY_TURNS:])
    user_turns = [t.text for t in history if t.role == "user" and t.text.strip()]
    if user_turns and switches_topic(question):
        return _TOPIC_SWITCH.sub("", question, count=1).strip()
    # A definite noun points back only in a thread without a named subject: with one ("the album" in a thread about a
    # band), the noun is the subject's, and the previous question's words would not say which.
    unnamed = user_turns and not (main_subject(user_turns[-1]) or main_subject(user_turns[0]))
    points_back = not has_cjk(question) and (
        (bool(unnamed) and refers_back(question, history)) or asks_duty_of_thread(question)
    )
    if not user_turns or not (is_follow_up(question) or points_back):
        return question
    if not is_follow_up(question):
        # A question of its own that points back ("how early do I have to file the form?"): it is asked as it is,
        # with the words of the thread's question to place it; none of its own words is swapped.
        said = _previous_standalone(history, similarity)
        carried = [w for w in content_words(said) if w not in question.lower() and not _AMOUNT.match(w)]
        named = main_subject(said)
        if named and named.lower() not in question.lower():
            # "E-12" is one name; its words apart ("int", a bare number dropped as an amount) name nothing.
            carried = [named, *(w for w in carried if w not in named.lower())]
        return f"{question.rstrip('?').strip()} ({' '.join(carried)})" if carried else question
    # "and everywhere else?" after "and in berlin?" after "what's the hotel cap in london?": in a thread of
    # ellipses, the previous question as it stood alone, not its own ellipsis.
    previous = _previous_standalone(history, similarity)
    names_answered = _names_in_answer(history)

    if has_cjk(question) or has_cjk(previous):
        return _condense_cjk(question, previous)

    if _CORRECTION.match(question):
        # "no, I meant the EU one": the previous question about the other name, or else an ellipsis of it.
        corrected = _corrected(question, previous)
        if corrected:
            return corrected
        question = f"what about {_CORRECTION.sub('', question)}"
    core = _CONNECTIVE.sub("", question).strip()
    if asks_what_next(question):
        condition = re.sub(r"^\s*(?:and|but|so|ok(?:ay)?)?[\s,]*(?:what\s+)?", "", question).rstrip("?.! ")
        asked = " ".join(w for w in content_words(previous) if w not in _MODALS)
        if _BARE_NEGATION.search(core):
            # "and if I don't?" after "How long do I have to acknowledge a page?": what happens if I don't
            # acknowledge a page. The words are the previous question's (its own phrase when it has one: "the
            # security awareness training" reads closer to the document than its bare terms); the question
            # is what follows.
            if not re.match(r"(?:if|when)\b", condition, re.I):
                condition = f"if {condition}"
            duty = _DUTY.search(previous)
            rewrite = f"What happens {condition} {duty.group(1).strip() if duty else asked}?"
            # What is not done is what the answer said must be done ("you must acknowledge within 5 minutes"):
            # its words are the ones a document's "if not …" sentence repeats.
            told = _answer_duty(history)
            return f"{rewrite} ({told})" if told else rewrite
        if re.match(r"(?:if|when)\b", condition, re.I):
            # "what if I don't spend it all?" after "what's the learning budget per year?": what happens to the
            # budget then, not the budget's amount again; the previous question under that condition when it
            # names no thing.
            topic = topic_of(previous, named_only=True)
            if topic:
                return f"What happens to {topic} {condition}?"
            return f"{previous.strip().rstrip('?？.').strip()} {condition}?"
        return f"What happens after {asked}?"  # "and then what?"
    only_asks = _ASKS_ONLY.match(question)
    if only_asks and _YES_NO.match(previous):
        # "for how long?" after "can contractors pause their engagement?": the same question, asked
        # how long; the previous words in brackets would lose which of them the "how long" is about.
        asked_now = only_asks.group(1).strip()
        return f"{asked_now} {previous.strip()[:1].lower()}{previous.strip()[1:]}"
    if _CONNECTIVE.match(question) and _stands_alone(core):
        return core  # "and how do I book a meeting room?": a new question, not the thread's
    # "and if it's over 7,500?": a condition on the previous question, whose pronoun is that question's thing.
    conditional = bool(_WHAT_IF.match(question))
    action = None if conditional else _resolve_action(core, previous)
    if action:
        return action  # "how do I do that?" after "can I carry over vacation days?"
    # "what happens when it ends?" after "which plan is it on?": a pronoun that the previous question used too
    # still stands for the thread's thing, not for the name the answer gave.
    same_pronoun = set(pronouns_in(core)) & set(pronouns_in(user_turns[-1]))
    name = None if conditional or same_pronoun else answer_entity(previous, history)
    resolved = _resolve_person(core, name, previous) if name else None
    if resolved:
        return resolved  # "when did they invest?" after "who led the series A?" → "Ridgeway Partners …"
    subject = main_subject(previous) or (main_subject(user_turns[0]) if len(user_turns) > 1 else None)
    if subject and (_SUBJECT_PRONOUNS.search(core) or _POSSESSIVE_PRONOUNS.search(core)):
        # The subject now stands in for the pronoun: the question is complete as it is.
        if _POSSESSIVE_PRONOUNS.search(core):
            return _POSSESSIVE_PRONOUNS.sub(f"{subject}'s", core, count=1)
        return _SUBJECT_PRONOUNS.sub(subject, core, count=1)
    topic = topic_of(previous) if subject is None and not conditional and _THING_PRONOUN.search(core) else None
    chained = subject is None and not conditional and (same_pronoun or (topic is None and pronouns_in(previous)))
    if chained and len(user_turns) > 1 and _THING_PRONOUN.search(core) and not pronouns_in(user_turns[-2]):
        # "how do i claim it?" after "what can i spend it on?" after "how much is the wellness stipend?": a pronoun
        # that follows a pronoun stands for the same thing, the one the question before them named.
        topic = topic_of(user_turns[-2], named_only=True) or topic
    resolved = _resolve_thing(core, topic) if topic else None
    if resolved:
        # "and who led it?" after "how much did we raise in the series A?": who led the series A;
        # "How often should I check it?" after "What pressure should I pump…": pressure.
        return resolved
    asked = asked_about(previous) if subject is None and not _POSSESSIVE_PRONOUNS.search(core) else None
    if asked and _SUBJECT_PRONOUNS.search(core):
        return _SUBJECT_PRONOUNS.sub(asked, core, count=1)  # what the previous question asked about
    renumbered = _renumbered(core, previous)
    if renumbered is not None:
        return renumbered  # "what about tier 4?" after "…in tier 2 cities?": the same question, tier 4
    new_words = content_words(core)
    carried = [w for w in content_words(previous) if w not in new_words and w.lower() not in core.lower()]
    if compares(core):
        # The things compared so far (Q1, Q2) are what the comparison ranges over, not what it is about.
        carried = [w for w in carried if not any(ch.isdigit() for ch in w) and w not in names_answered]
    if _THE_REST.search(core) and _CONNECTIVE.match(question):
        # "and everywhere else?" after "what's the hotel cap in berlin?": the same question, past the names
        # asked about so far.
        named = [w for w in content_words(previous) if w in _names(previous) or w in names_answered]
        if named:
            rest = re.sub(rf"\s*\b(?:in|at|for|on|of)?\s*\b{re.escape(named[-1])}\b", "", previous, count=1, flags=re.I)
            return f"{rest.strip().rstrip('?？.').strip()} {core.rstrip('?').strip()}?"
    other = _the_other(core, previous, names_answered)
    if other:
        return other  # "what about the other plan?" after "how much is Starter?", answered with Starter and Growth
    new_names, old_names = _names(question), _names(previous)
    bare = _bare_entity(core, new_words) if _CONNECTIVE.match(question) else []
    if not old_names and bare:
        # A thread typed in lower case ("how much is starter per truck?"): the answer says which words are
        # names, and the follow-up's bare word is the name it now asks about ("and growth?").
        old_names = _proper_names([w for w in content_words(previous) if w in names_answered], history)
        new_names = new_names or (bare if old_names else [])
    # A word the previous question said already replaces none of its other words ("and if it's approved on the
    # 25th?" after "when do approved expenses get paid out?"); a pronoun refers to the previous thing, it does not
    # swap it ("by when do we have to take it?").
    fresh = [w for w in new_words if w not in content_words(previous)]
    swaps = fresh and carried and (bool(_CONNECTIVE.match(question)) or not pronouns_in(core))
    replacements = _replacements(fresh, carried, similarity, new_names, old_names) if swaps else {}
    # "after five years" measures the previous question's thing, it does not replace "days" by "years".
    measures = _quantified(new_words, core) - _quantified(carried, previous)
    replacements = {old: new for old, new in replacements.items() if new not in measures}
    if _names_a_thing(question):
        replacements = _with_modifiers(replacements, core, previous)
    if not replacements and bare and not new_names and len(new_words) <= 2:
        phrase = " ".join(w for w in re.findall(r"[\w'’-]+", core) if w.lower() not in _DETERMINERS)
        swapped = _slot_swapped(previous, phrase, similarity)
        if swapped:
            return swapped  # "what about contractors?" after "… does the primary caregiver get?"
    if not replacements and (_CONDITION.match(core) or is_fragment(question)):
        return f"{_stem_for(previous, core)} {core.rstrip('?').strip()}?"
    if not replacements and _WHAT_IF.match(question):
        # "what if I'm remote?": the previous question, under that condition.
        condition = re.sub(r"^\s*if\b\s*", "", core).rstrip("?").strip()
        return f"{_stem_for(previous, condition)} if {condition}?"
    # A question of its own ("what happens to their data after they cancel?") is not the previous one with a word
    # swapped: only an ellipsis is.
    swappable = bool(_CONNECTIVE.match(question)) or not _asks_own_question(core)
    if replacements and swappable and len(new_words) <= MAX_SUBSTITUTION_WORDS:
        # "and for contractors?" after "How much parental leave do employees get?" is that question
        # with one word swapped: the best standalone rewrite is exactly that.
        rewritten = previous
        for old, new in replacements.items():
            original = re.search(rf"\b{re.escape(new)}\b", core, flags=re.I)  # keep the user's casing
            new_text = original.group(0) if original else new
            rewritten = re.sub(rf"\b{re.escape(old)}\b", lambda _m, t=new_text: t, rewritten, count=1, flags=re.I)
        return rewritten
    # The previous question's values ("an expense claim of 10000") were its own; the thread's topic is its words.
    carried = [w for w in carried if w not in replacements and not _AMOUNT.match(w)]
    if not carried:
        return core or question
    return f"{core.rstrip('?').strip()} ({' '.join(carried)})" if core else " ".join(carried)


MAX_SUBSTITUTION_WORDS = 3
# A sum of money as people type it: "$1,500", "7,500", "9k", "€200".
_MONEY = r"(?:[$€£¥]\s?\d[\d,.]*|\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?k\b)"
# A sum the question states ("of $1,500", "for 10000"), with the word that attaches it; a year ("in 2026") is not one.
_STATED_AMOUNT = re.compile(
    rf"\s+(?:(?:of|for|at|worth|about|around)\s+)?{_MONEY}(?=[\s?？.!,]|$)"
    r"|\s+(?:of|for|worth)\s+\d+(?=[\s?？.!,]|$)",
    re.I,
)


def _stem_for(previous: str, condition: str) -> str:
    """The previous question to put a condition on; an amount it stated goes when the condition states another: "and
    if it's over 7,500?" after "who approves an expense claim of $1,500?" asks about claims over 7,500."""
    stem = previous.strip().rstrip("?？.").strip()
    if re.search(_MONEY, condition, re.I):
        stem = _STATED_AMOUNT.sub("", stem)
    return stem


# A follow-up that is only a question phrase: "for how long?", "how much?", "and by when?".
_ASKS_ONLY = re.compile(
    r"^\s*(?:and|but|so|ok(?:ay)?)?[\s,]*((?:for|until|till|by|since|from)?\s*"
    r"(?:how\s+(?:long|much|many|often|soon|far|early|late)|when|where|who|which))\s*[?.!]*\s*$",
    re.I,
)
# A question answered yes or no ("can I …?", "do contractors …?"), which a bare "how long?" turns into its how long.
_YES_NO = re.compile(r"^\s*(?:do|does|did|can|could|is|are|was|were|will|would|should|may|must|has|have)\b", re.I)
# A value, not a name: "10000", "$1,500", "25th" (a code such as "sev3" or "401k" names a thing).
_AMOUNT = re.compile(r"^\$?\d[\d,.]*(?:st|nd|rd|th)?$")
# "and how do I book a meeting room?" asks a question of its own; "so when should i not deploy classic?" (two words)
# still leans on the thread.
MIN_OWN_QUESTION_WORDS = 3
_WHAT_IF = re.compile(r"^\s*(?:and|but|so)?[\s,]*(?:what\s+)?if\b", re.I)


def _stands_alone(core: str) -> bool:
    """A question of its own after the connective: a wh-word, enough words of its own, no pronoun."""
    tokens = raw_tokens(_EXISTENTIAL_THERE.sub(" ", core))
    return (
        _asks_own_question(core)
        and len(content_words(core)) >= MIN_OWN_QUESTION_WORDS
        and not any(t in _PRONOUNS for t in tokens)
    )


def _asks_own_question(core: str) -> bool:
    """Whether `core` starts with a wh-word ("how do I …", "what's …"): a question of its own."""
    words = raw_tokens(core)
    return bool(words) and words[0] in {"what", "how", "who", "whom", "when", "where", "why", "which"} | {
        w for w in _QUESTION_WORDS if "'" in w or w == "whats"
    }


_MUST = re.compile(
    r"\b(?:must|need to|needs to|have to|has to|(?:is|are) required to|should)\s+([^.;!?\[\]]+)",
    re.I,
)


def _answer_duty(history: Sequence[Turn]) -> str | None:
    """What the latest answer's first sentence says must be done ("acknowledge within 5 minutes")."""
    first = re.split(r"(?<=[.!?])\s+|\s*\[\d+\]", _latest_answer(history).strip(), maxsplit=1)[0]
    match = _MUST.search(first)
    return match.group(1).strip(" ,") if match else None


# --- what the previous turn was about, for a pronoun, a "what if …" or a swapped slot to stand for ---------------

# "what's the learning budget per year?", "how long is paid leave for the secondary caregiver?": the thing asked about
# is the subject of "is".
_COPULAR_SUBJECT = re.compile(
    r"^\s*(?:what|which|who|where|when|how\s+(?:long|much|many|often|big|far|old))"
    r"(?:['’]?s\b|\s+(?:is|are|was|were)\b)\s*(.+?)[\s?.!]*$",
    re.I,
)
_DETERMINERS = frozenset(["the", "a", "an", "our", "my", "your"])
_PHRASE_LINKS = frozenset(["of", "from", "for"])
_PHRASE_STOP = STOPWORDS | _QUESTION_WORDS | {"per"}
# "a year", "a month": a rate, not a thing ("how many vacation days do I get a year?").
_TIME_UNITS = frozenset(["year", "month", "week", "day", "night", "quarter", "hour", "minute"])
_RATE = re.compile(rf"\s+(?:per|a|an|each|every)\s+(?:{'|'.join(_TIME_UNITS)})s?$", re.I)


def _is_phrase_word(word: str, previous: str | None) -> bool:
    """A word inside a noun phrase: a content word, or the number or letter of a numbered thing ("series A")."""
    low = word.lower()
    if low not in _PHRASE_STOP:
        return True
    return previous is not None and (word.isdigit() or (len(word) == 1 and word.isupper()))


def _determined_phrase(text: str) -> str | None:
    """The first noun phrase with a determiner, with one "of/from/for" phrase after it: "an email from an investor",
    "the series A", "the learning budget" (of "…per year")."""
    words = re.findall(r"[\w'’-]+", text)
    for i, word in enumerate(words):
        if word.lower() not in _DETERMINERS:
            continue
        end = i + 1
        while end < len(words) and _is_phrase_word(words[end], words[end - 1] if end > i + 1 else None):
            end += 1
        if end == i + 1 or (end == i + 2 and words[i + 1].lower() in _TIME_UNITS):
            continue
        if end + 1 < len(words) and words[end].lower() in _PHRASE_LINKS and not words[end + 1][:1].isdigit():
            start = end + 1 + (words[end + 1].lower() in _DETERMINERS)
            tail = start
            while tail < len(words) and _is_phrase_word(words[tail], words[tail - 1] if tail > start else None):
                tail += 1
            if tail > start:
                end = tail
        return " ".join(words[i:end])
    return None


def topic_of(question: str, named_only: bool = False) -> str | None:
    """What a question is about, as it said it: the subject of "what's …", the thing a "what X should…" asks
    about, or (unless `named_only`) its first noun phrase with a determiner — "when do I have to submit my bank
    details?" is about a deadline it does not name, not about the bank details. None when it names nothing."""
    match = _COPULAR_SUBJECT.match(question)
    if match and match.group(1).split()[0].lower() not in STOPWORDS - _DETERMINERS:
        return _RATE.sub("", match.group(1)) or match.group(1)
    return asked_about(question) or (None if named_only else _determined_phrase(question))


def _plural(phrase: str) -> bool:
    last = phrase.split()[-1].lower()
    return last.endswith("s") and not last.endswith(("ss", "us", "is"))


_THING_PRONOUN = re.compile(_AFTER_DETERMINER + r"\b(it|its|that|this|they|them|their)\b", re.I)


# After "does"/"can" comes the subject, then a bare verb: in "does that include the wine?" the word after "that" is
# a verb (an article or preposition follows it), so "that" is the subject; in "can that plan do it?" it is a noun.
_SUBJECT_AFTER = re.compile(r"\b(?:do|does|did|will|would|can|could|should|might)\s+$", re.I)
_OBJECT_START = frozenset(
    ["the", "a", "an", "my", "our", "your", "their", "his", "her", "its", "any", "all", "to", "for", "in", "on", "at"]
    + ["of", "with", "by", "from", "as"]
)


def _is_subject(core: str, start: int, after: Sequence[str]) -> bool:
    """Whether the "that"/"this" at `start` is the subject of a do/modal question ("does that apply to me?")."""
    verb_follows = len(after) == 1 or (len(after) > 1 and after[1].lower() in _OBJECT_START)
    return verb_follows and bool(_SUBJECT_AFTER.search(core[:start]))


def _resolve_thing(core: str, topic: str) -> str | None:
    """`core` with its first pronoun for a thing replaced by `topic`, when they agree: "it"/"that" for anything,
    "they"/"them" for a plural; "that plan" is a determiner, not a pronoun, but "does that include" is one."""
    for match in _THING_PRONOUN.finditer(core):
        word = match.group(1).lower()
        after = re.findall(r"[\w'’-]+", core[match.end() :])
        subject = _is_subject(core, match.start(), after)
        determiner = bool(after) and after[0].lower() not in _PHRASE_STOP and not subject
        if word in ("that", "this") and determiner:
            continue
        if word in ("they", "them", "their") and not _plural(topic):
            continue
        replacement = f"{topic}'s" if word in ("its", "their") else topic
        return core[: match.start()] + replacement + core[match.end() :]
    return None


# "who led the series A?" → "Ridgeway Partners led it.": a "they" in the next turn is the answer's name.
_ASKS_FOR_NAME = re.compile(r"^\s*(?:who|whom|who['’]s|which)\b", re.I)
_PERSON_PRONOUN = re.compile(r"\b(he|him|his|she|her|hers|they|them|their)\b", re.I)
_SINGLE_PERSON_PRONOUN = re.compile(r"\b(he|him|his|she|her|hers)\b", re.I)
_NAME_WORDS = re.compile(r"\b[A-Z][\w'’-]*(?:\s+[A-Z][\w'’-]*)*")


def _latest_answer(history: Sequence[Turn]) -> str:
    answers = [t.text for t in history if t.role == "assistant" and t.text.strip() and not is_fixed_reply(t.text)]
    return answers[-1] if answers else ""


def answer_entity(previous: str, history: Sequence[Turn]) -> str | None:
    """The name a who/which question was answered with: the first name in the answer's first sentence that the
    question did not say. A single capitalised word starting the sentence is not taken for a name."""
    # "who was his mother?" or "who did Anna Vissi marry?" keeps its own person: the thread is still about them.
    if not _ASKS_FOR_NAME.match(previous) or _PERSON_PRONOUN.search(previous) or main_subject(previous):
        return None
    first = re.split(r"(?<=[.!?])\s+|\s*\[\d+\]", _latest_answer(history).strip(), maxsplit=1)[0]
    # An aside is not the answer: "Feature: SSO (SAML); Enterprise: Included" answers with Enterprise.
    first = re.sub(r"\([^)]*\)", " ", first)
    said = {w.lower() for w in re.findall(r"[\w'’-]+", previous)}
    for match in _NAME_WORDS.finditer(first):
        words = [w for w in match.group(0).split() if w.lower() not in STOPWORDS]
        at_start = not first[: match.start()].strip(" \"'“(")
        if not words or all(w.lower() in said for w in words) or (at_start and len(match.group(0).split()) == 1):
            continue
        return " ".join(words)
    return None


def _resolve_person(core: str, name: str, asked: str) -> str | None:
    """`core` with its first pronoun replaced by the name a who/which question was answered with (a person
    pronoun after "who", a thing's after "which")."""
    # "they" after "who …?" is as often the group the thread is about ("Who was in the band?" … "Did they record an
    # album?") as the answer's name: only "he"/"she" are taken for the answer's person.
    pattern = _SINGLE_PERSON_PRONOUN if re.match(r"\s*who", asked, re.I) else _THING_PRONOUN
    match = pattern.search(core)
    if not match:
        return None
    replacement = f"{name}'s" if match.group(1).lower() in ("his", "her", "hers", "their", "its") else name
    return core[: match.start()] + replacement + core[match.end() :]


# "how do I do that?" after "can I carry over vacation days?": "do that" is the action asked about.
_DO_THAT = re.compile(r"\bdo\s+(?:that|it|this|so)\b", re.I)
_ACTION_ASKED = re.compile(r"^\s*(?:can|could|may|should|must|do|shall)\s+(?:i|we)\s+(?:just\s+)?(.+?)[\s?.!]*$", re.I)


def _resolve_action(core: str, previous: str) -> str | None:
    action = _ACTION_ASKED.match(previous)
    if not action or not _DO_THAT.search(core):
        return None
    return _DO_THAT.sub(action.group(1), core, count=1)


# "no, I meant the EU one": the previous question, the name swapped.
_CORRECTION = re.compile(r"^\s*(?:no|nope|sorry|oops|actually)?[\s,.!]*i\s+mean[t]?\b[\s,:]*", re.I)


def _corrected(question: str, previous: str) -> str | None:
    """The previous question with the one name the correction swaps: an acronym for an acronym ("US" → "EU"),
    a capitalised name for a capitalised name ("London" → "Berlin")."""
    rest = _CORRECTION.sub("", question)
    for shape in (r"\b[A-Z]{2,5}\b", r"(?<!^)\b[A-Z][a-z][\w'’-]*"):
        # An acronym is a name even when it spells a stopword ("US").
        acronym = not shape.startswith("(?<!^)")
        new = [w for w in re.findall(shape.removeprefix("(?<!^)"), rest) if acronym or w.lower() not in STOPWORDS]
        old = [
            w for w in re.findall(shape, previous.strip()) if w not in new and (acronym or w.lower() not in STOPWORDS)
        ]
        if len(new) == 1 and len(old) == 1:
            return re.sub(rf"\b{re.escape(old[0])}\b", new[0], previous, count=1)
    return None


# "how much paid parental leave does the primary caregiver get?": the one who gets it, which "what about
# contractors?" swaps.
_INVERTED_SUBJECT = re.compile(
    r"^\s*(?:how|what|which|when|where|why)\b.*?\s(do|does|did|can|will|should|would)\s+(.+)$", re.I
)
# "how many vacation days …", "max stops in …": what the question counts.
_COUNTED = re.compile(
    r"^\s*(?:how many|max(?:imum)?|min(?:imum)?|(?:the\s+)?(?:max(?:imum)?|min(?:imum)?\s+)?number of)\s+"
    r"((?:[\w-]+\s+)?[\w-]+)",
    re.I,
)
# The counted slot is known, so a swap into it takes a lower bar than a free one (SUBSTITUTION_SIMILARITY).
COUNTED_SWAP_SIMILARITY = 0.3
_PRONOUN_SUBJECTS = frozenset(["i", "we", "you", "they", "he", "she", "it", "one", "someone", "people"])


def _inverted_subject(previous: str) -> tuple[str, str] | None:
    """The subject between an auxiliary and its verb ("does | the primary caregiver | get"), with the auxiliary."""
    match = _INVERTED_SUBJECT.match(previous)
    if not match:
        return None
    words = re.findall(r"[\w'’-]+", match.group(2))
    end = 0
    while end < len(words) and (words[end].lower() in _DETERMINERS or words[end].lower() not in _PHRASE_STOP):
        end += 1
    # The verb ends the subject: a stopword ("get", "have") or, at the end of the question, its last word ("cost").
    subject = words[: end - 1] if end == len(words) else words[:end]
    content = [w for w in subject if w.lower() not in _DETERMINERS]
    if not content or content[0].lower() in _PRONOUN_SUBJECTS:
        return None
    return " ".join(subject), match.group(1)


def _slot_swapped(previous: str, phrase: str, similarity: Callable | None) -> str | None:
    """The previous question with `phrase` (a bare noun phrase: "contractors", "sick days") in the slot it fills:
    the inverted subject for a plural ("does the primary caregiver get" → "do contractors get"), or the counted
    thing when the phrase is of its kind ("how many stops" → "how many vehicles")."""
    if not _plural(phrase):
        return None
    subject = _inverted_subject(previous)
    if subject:
        old, aux = subject
        swapped = re.sub(
            rf"\b{re.escape(aux)}\s+{re.escape(old)}\b",
            f"{'do' if aux.lower() == 'does' else aux} {phrase}",
            previous,
            count=1,
        )
        return swapped if swapped != previous else None
    counted = _COUNTED.match(previous)
    if not counted:
        return None
    words = counted.group(1).split()
    words = words if _plural(" ".join(words)) else words[:1]
    if not words or not _plural(words[-1]):
        return None
    old = " ".join(words)
    same_head = words[-1].lower() == phrase.split()[-1].lower()
    close = similarity is not None and float(similarity([phrase], [old])[0][0]) >= COUNTED_SWAP_SIMILARITY
    if not (same_head or close):
        return None
    return previous[: counted.start(1)] + previous[counted.start(1) :].replace(old, phrase, 1)


def _cjk_elliptic(question: str) -> bool:
    """A Chinese question that leans on the one before: a condition, a closing 呢, or no subject noun."""
    if _CJK_CONDITION.match(question) or _CJK_ENDS_ELLIPSIS.search(question):
        return True
    content = set(cjk_content_words(question))
    subject = [w for w, tag in cjk_words(question) if w in content and tag in _CJK_SUBJECT_TAGS and tag[:2] != "nr"]
    return not subject and not any(c.isascii() and c.isalnum() for c in question)


# What a Chinese question asks with, to leave out when only its subject is carried into a follow-up.
_CJK_QUESTION_SPAN = re.compile(
    r"什么时候|什么|多少钱|多少|几[天点次个月年号]?|谁|哪里|哪儿|哪[个些天位家]?|怎么办|怎么样|怎么|如何|多久|多长时间"
    r"|吗|是否|能不能|可不可以|要不要|呢"
)


def _condense_cjk(question: str, previous: str) -> str:
    """A Chinese follow-up completed from the previous question. "那陪产假呢？" after "婚假有几天？" is that
    question about 陪产假 (the word with the same head, 假, is replaced; a place by a place: "那北京办公室呢？"
    after a Shanghai question asks about Beijing); a follow-up with a question of its own ("什么时候充到卡里？")
    takes the previous question's subject, not its question words; otherwise the whole previous question."""
    core = _CJK_CONNECTIVE.sub("", question)
    core = _CJK_PRONOUN.sub("", core).strip(" ？?。")
    context = "".join(ch for ch in previous if ch not in "？?。！!，,")
    if not core:
        return context
    if _CJK_ENDS_ELLIPSIS.search(question) and not _CJK_CONDITION.match(core):
        phrase = re.sub(r"(?:的)?呢$", "", core).strip()
        new_places, old_places = cjk_names(phrase), [p for p in cjk_names(context) if p not in phrase]
        if new_places and len(old_places) == 1 and phrase.find(new_places[0]) == 0:
            old = old_places[0] + phrase[len(new_places[0]) :]  # "上海办公室" for "北京办公室"
            return context.replace(old, phrase, 1) if old in context else context.replace(old_places[0], phrase, 1)
        words = cjk_content_words(context)
        same_head = [w for w in words if len(phrase) > 1 and w[-1] == phrase[-1] and w not in phrase]
        if same_head:
            return context.replace(same_head[0], phrase, 1)
    if _CJK_ASKS.search(core) and not _CJK_CONDITION.match(core):
        subject = " ".join(_CJK_QUESTION_SPAN.sub(" ", context).split())
        return f"{subject} {core}".strip()
    return f"{context} {core}".strip()


# "I have to acknowledge a page", "we need to finish the security awareness training": what the previous
# question says must be done, as it said it.
_DUTY = re.compile(
    r"\b(?:i|we|you)\s+(?:need to|needs to|have to|has to|must|should|got to|am supposed to|are supposed to)\s+"
    r"(.+?)[\s?.!]*$",
    re.I,
)
# "tier 2", "level 3", "series A": a thing with a number or a letter, which a follow-up may renumber.
_NUMBERED = re.compile(r"\b([A-Za-z]{2,})\s+(\d+|[A-Z])\b")
_THE_REST = re.compile(
    r"\b(?:(?:everywhere|anywhere|everyone|anyone|everybody) else|elsewhere|the rest|all other|"
    r"other (?:ones|cities|places|offices|countries))\b",
    re.I,
)


def _previous_standalone(history: Sequence[Turn], similarity: Callable | None) -> str:
    """The latest user turn; condensed against the turns before it when it was an ellipsis itself ("and in
    berlin?", "and Q2?"): a thread of ellipses, each completed by the one before, whatever the new message's shape
    ("by when do we have to take it?" after "and secondary?"). A turn with a pronoun stays as asked: its own words
    place the thread better than a rewrite of a rewrite."""
    last = max(i for i, t in enumerate(history) if t.role == "user" and t.text.strip())
    text = history[last].text
    if has_cjk(text) or not (_CONNECTIVE.match(text) or compares(text)) or pronouns_in(text):
        return text
    completed = condense_offline(text, history[:last], similarity)
    # Only a question completed as a question ("what's the hotel cap in berlin?"); terms carried in brackets
    # ("for contractors (company match 401k)") are a search hint, and would be carried on into every later turn.
    return text if completed.rstrip("?？ ").endswith(")") else completed


def _renumbered(core: str, previous: str) -> str | None:
    """The previous question with its numbered thing renumbered, when that is all the follow-up says."""
    for match in _NUMBERED.finditer(core):
        head, code = match.group(1), match.group(2)
        if head.lower() in STOPWORDS or len(content_words(core)) > MAX_SUBSTITUTION_WORDS:
            continue
        old = re.search(rf"\b(?i:{re.escape(head)})\s+(\d+|[A-Z])\b", previous)
        if old and old.group(1).lower() != code.lower():
            return previous[: old.start(1)] + code + previous[old.end(1) :]
    return None


def _names_in_answer(history: Sequence[Turn]) -> set[str]:
    """Words the latest answer writes as names — capitalised inside a sentence, or as a label ("Starter: $29
    per vehicle…") — so that a question that typed them lower-case ("how much is starter?") still names them."""
    answers = [t.text for t in history if t.role == "assistant" and t.text.strip() and not is_fixed_reply(t.text)]
    if not answers:
        return set()
    text = answers[-1]
    names = {m.group(1).lower() for m in re.finditer(r"(?<=[\w,;(] )([A-Z][a-z][\w-]*)\b", text)}
    names |= {m.group(1).lower() for m in re.finditer(r"(?:^|[.;!?\]]\s+)([A-Z][a-z][\w-]*):", text)}
    return names - STOPWORDS - _QUESTION_WORDS


def _proper_names(names: list[str], history: Sequence[Turn]) -> list[str]:
    """Of several names, the ones the latest answer never writes in lower case: "Samsara", not the label "Read
    Vehicles" of a text that also says "500 vehicles"."""
    if len(names) < 2:
        return names
    lower = set(re.findall(r"\b[a-z][\w-]*\b", _latest_answer(history)))
    return [w for w in names if w not in lower] or names


def _bare_entity(core: str, new_words: list[str]) -> list[str]:
    """The one word a bare ellipsis names ("and growth?", "what about the premium plan?"): the thing the
    follow-up now asks about in place of the previous question's name."""
    if len(new_words) > 2 or _CONDITION.match(core) or any(t in _PRONOUNS for t in raw_tokens(core)):
        return []
    return new_words[:1]


_THE_OTHER = re.compile(r"\bthe other\s+(?:one|[\w-]+)\b", re.I)


def _the_other(core: str, previous: str, names_answered: set[str]) -> str | None:
    """The previous question about the other name, when the question named one and the answer one more."""
    if not _THE_OTHER.search(core):
        return None
    said = content_words(previous)
    asked = [w for w in said if w in names_answered or w in _names(previous)]
    others = names_answered - set(said)
    if len(asked) != 1 or len(others) != 1:
        return None
    (other,) = others
    return re.sub(rf"\b{re.escape(asked[0])}\b", other.capitalize(), previous, count=1, flags=re.I)


def asks_for_something_else(question: str, history: Sequence[Turn]) -> bool:
    """Whether a follow-up asks for what the previous answer did not say: what comes next ("and then?",
    "and if I don't?"), or the same question about someone or something else ("and for contractors?"). Its
    answer does not lead with the sentence the thread was just told (bot.agent.answering, `avoid`)."""
    if asks_what_next(question) or _CORRECTION.match(question):
        return True  # "no, I meant the EU one": what the thread was told answered another question
    previous = [t.text for t in history[-MAX_HISTORY_TURNS:] if t.role == "user" and t.text.strip()]
    if not previous or has_cjk(question) or not _CONNECTIVE.match(question):
        return False
    core = _CONNECTIVE.sub("", question).strip()
    if _CONDITION.match(core) or any(t in _PRONOUNS for t in raw_tokens(_EXISTENTIAL_THERE.sub(" ", core))):
        return False  # "and after five years?" narrows the same question; "and who led it?" asks about it
    if _THE_OTHER.search(core):
        return True  # "what about the other plan?": not the one asked about
    asked_before = set(content_words(previous[-1]))
    return _renumbered(core, previous[-1]) is not None or any(w not in asked_before for w in content_words(core))


SUBSTITUTION_SIMILARITY = 0.45
_CODE = re.compile(r"^([a-z]+)(\d+)$")


def _names(text: str) -> list[str]:
    """Capitalised words that are not the first word: names of plans, places, products."""
    words = re.findall(r"[\w'’-]+", text)
    return [w.lower() for w in words[1:] if w[:1].isupper() and not w.isupper()]


def _replacements(
    new_words: list[str],
    carried: list[str],
    similarity: Callable[[list[str], list[str]], np.ndarray] | None,
    new_names: Sequence[str] = (),
    old_names: Sequence[str] = (),
) -> dict[str, str]:
    """Carried word → the new word that stands in for it: same kind of code (SEV1 → SEV3, Q3 → Q4),
    a name for a name (Starter → Growth), or the closest in meaning when close enough
    (employees → contractors)."""
    result: dict[str, str] = {}
    sims = similarity(new_words, carried) if similarity is not None else None
    carried_names = [w for w in carried if w in old_names]
    for i, new in enumerate(new_words):
        code = _CODE.match(new)
        same_kind = [w for w in carried if code and (m := _CODE.match(w)) and m.group(1) == code.group(1)]
        if same_kind:
            result.setdefault(same_kind[0], new)
            continue
        if new in new_names and len(carried_names) == 1 and carried_names[0] not in result:
            result[carried_names[0]] = new
            continue
        if sims is not None:
            best = int(np.argmax(sims[i]))
            if sims[i][best] >= SUBSTITUTION_SIMILARITY and carried[best] not in result:
                result[carried[best]] = new
    return result


def _names_a_thing(question: str) -> bool:
    """Whether a follow-up only names a thing ("and in the upside scenario?", "what about the annual plan?"): after
    its connective, no question word and no more words than a swap takes."""
    rest = _CONNECTIVE.sub("", question, count=1)
    return (
        bool(_CONNECTIVE.match(question))
        and not any(t in _WH_WORDS for t in raw_tokens(rest))
        and len(content_words(rest)) <= MAX_SUBSTITUTION_WORDS
    )


def _with_modifiers(replacements: dict[str, str], core: str, previous: str) -> dict[str, str]:
    """A swapped word's modifier goes with it when the follow-up gives the new word one: "and in the upside
    scenario?" after "what revenue does the base case of the plan assume?" swaps "base case", not "case" alone."""
    result = dict(replacements)
    core_words, previous_words = content_words(core), content_words(previous)
    for old, new in replacements.items():
        new_mod = re.search(rf"\b([\w'’-]+)\s+{re.escape(new)}\b", core, re.I)
        old_mod = re.search(rf"\b([\w'’-]+)\s+{re.escape(old)}\b", previous, re.I)
        if not (new_mod and old_mod):
            continue
        fresh, carried = new_mod.group(1).lower(), old_mod.group(1).lower()
        if fresh in core_words and carried in previous_words and carried not in core_words and carried not in result:
            result[carried] = fresh
    return result


CONDENSE_SYSTEM = (
    "You rewrite the user's latest message into one standalone search query for a company knowledge base. "
    "Resolve pronouns and ellipsis from the conversation. Keep the user's language. If the message already "
    "stands alone, return it unchanged. Never answer the question. Reply as JSON."
)


def usable_rewrite(rewrite: CondensedQuery, question: str, history: Sequence[Turn]) -> str | None:
    """The LLM's standalone query, if it is one. A rewrite must be about the conversation: one that
    shares no term with it (a small model answered "standalone_querry") would derail every later step."""
    query = " ".join(rewrite.standalone_query.split())
    if not query or len(query) > 4 * max(len(question), 200):
        return None
    said = content_terms(" ".join([question, *(t.text for t in history[-MAX_HISTORY_TURNS:])]))
    return query if content_terms(query) & said else None


def condense_messages(question: str, history: Sequence[Turn]) -> list[dict]:
    lines = [f"{t.role}: {t.text[:800]}" for t in history[-MAX_HISTORY_TURNS:]]
    return [
        {"role": "system", "content": CONDENSE_SYSTEM},
        {"role": "user", "content": "Conversation:\n" + "\n".join(lines) + f"\n\nLatest message: {question}"},
    ]
