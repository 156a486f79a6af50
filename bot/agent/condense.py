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
}
# "Is there a limit?" refers to nothing: existential "there" is not the pronoun "there"
# ("what's the office like there?").
_EXISTENTIAL_THERE = re.compile(
    r"\b(?:is|are|was|were|will|would|be)\s+there\b|\bthere\s+(?:is|are|was|were|be|will|would|has|have|had)\b|\bthere['’]s\b",
    re.I,
)
_SUBJECT_PRONOUNS = re.compile(r"\b(it|they|them|he|she|him|her|this|that)\b", re.I)
_POSSESSIVE_PRONOUNS = re.compile(r"\b(its|their|his|her)\b", re.I)
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
}
# Proper-noun-ish phrases: capitalised words not at a sentence start, e.g. "Anna Vissi", "Shanghai office".
_CAPITALISED = re.compile(r"(?<![.!?]\s)(?<!^)\b([A-Z][\w'’-]+(?:\s+(?:of|the|de|van|von)?\s*[A-Z][\w'’-]+)*)")


# A follow-up that asks what happens next: "and if I don't?", "what if not?", "and then?", "what if I miss it?".
_NOT = r"(?:don['’]?t|do not|doesn['’]?t|does not|didn['’]?t|can['’]?t|cannot|won['’]?t|couldn['’]?t|not)"
_WHAT_NEXT = re.compile(
    r"^\s*(?:and|but|so|ok(?:ay)?)?[\s,]*(?:what\s+)?(?:if|when)\s+"
    rf"(?:i|we|you|they|he|she|it|someone|nobody|no one)?\s*(?:{_NOT}|miss|fail|forget)\b"
    r"|\bwhat happens (?:next|then|after(?:wards)?|if not)\b|\b(?:and|what happens) then\b|\bthen what\b"
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


def is_follow_up(question: str) -> bool:
    if _CONNECTIVE.match(question) or _CJK_CONNECTIVE.match(question) or compares(question):
        return True
    if not has_cjk(question) and asks_what_next(question) and len(content_words(question)) <= 2:  # "what's next?"
        return True
    tokens = raw_tokens(_EXISTENTIAL_THERE.sub(" ", question))
    if has_cjk(question):
        return bool(_CJK_PRONOUN.search(question)) or len(question.strip()) <= 6 or _cjk_elliptic(question)
    if any(t in _PRONOUNS for t in tokens):
        return True
    return len(content_words(question)) <= 1


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
    if not user_turns or not is_follow_up(question):
        return question
    # "and everywhere else?" after "and in berlin?" after "what's the hotel cap in london?": in a thread of
    # ellipses, the previous question as it stood alone, not its own ellipsis. A question with words of its own
    # ("what does that mean?") takes the previous turn as it was asked.
    ellipsis = bool(_CONNECTIVE.match(question)) or compares(question)
    previous = _previous_standalone(history, similarity) if ellipsis else user_turns[-1]
    names_answered = _names_in_answer(history)

    if has_cjk(question) or has_cjk(previous):
        return _condense_cjk(question, previous)

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
            return f"What happens {condition} {duty.group(1).strip() if duty else asked}?"
        if re.match(r"(?:if|when)\b", condition, re.I):
            # "what if I don't spend it all?": the previous question, under that condition.
            return f"{previous.strip().rstrip('?？.').strip()} {condition}?"
        return f"What happens after {asked}?"  # "and then what?"
    subject = main_subject(previous) or (main_subject(user_turns[0]) if len(user_turns) > 1 else None)
    if subject is None and _SUBJECT_PRONOUNS.search(core) and not _POSSESSIVE_PRONOUNS.search(core):
        subject = asked_about(previous)  # "How often should I check it?" after "What pressure…": pressure
    if subject and (_SUBJECT_PRONOUNS.search(core) or _POSSESSIVE_PRONOUNS.search(core)):
        # The subject now stands in for the pronoun: the question is complete as it is.
        if _POSSESSIVE_PRONOUNS.search(core):
            return _POSSESSIVE_PRONOUNS.sub(f"{subject}'s", core, count=1)
        return _SUBJECT_PRONOUNS.sub(subject, core, count=1)
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
    new_names, old_names = _names(question), _names(previous)
    bare = _bare_entity(core, new_words) if _CONNECTIVE.match(question) else []
    if not old_names and bare:
        # A thread typed in lower case ("how much is starter per truck?"): the answer says which words are
        # names, and the follow-up's bare word is the name it now asks about ("and growth?").
        old_names = [w for w in content_words(previous) if w in names_answered]
        new_names = new_names or (bare if old_names else [])
    replacements = _replacements(new_words, carried, similarity, new_names, old_names) if new_words and carried else {}
    # "after five years" measures the previous question's thing, it does not replace "days" by "years".
    measures = _quantified(new_words, core) - _quantified(carried, previous)
    replacements = {old: new for old, new in replacements.items() if new not in measures}
    if not replacements and _CONDITION.match(core):
        return f"{previous.strip().rstrip('?？.').strip()} {core.rstrip('?').strip()}?"
    if replacements and len(new_words) <= MAX_SUBSTITUTION_WORDS:
        # "and for contractors?" after "How much parental leave do employees get?" is that question
        # with one word swapped: the best standalone rewrite is exactly that.
        rewritten = previous
        for old, new in replacements.items():
            original = re.search(rf"\b{re.escape(new)}\b", core, flags=re.I)  # keep the user's casing
            new_text = original.group(0) if original else new
            rewritten = re.sub(rf"\b{re.escape(old)}\b", lambda _m, t=new_text: t, rewritten, count=1, flags=re.I)
        return rewritten
    carried = [w for w in carried if w not in replacements]
    if not carried:
        return core or question
    return f"{core.rstrip('?').strip()} ({' '.join(carried)})" if core else " ".join(carried)


MAX_SUBSTITUTION_WORDS = 3


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
    berlin?", "and Q2?"): a thread of ellipses, each completed by the one before. A turn with a pronoun
    stays as asked: its own words place the thread better than a rewrite of a rewrite."""
    last = max(i for i, t in enumerate(history) if t.role == "user" and t.text.strip())
    text = history[last].text
    tokens = raw_tokens(_EXISTENTIAL_THERE.sub(" ", text))
    ellipsis = bool(_CONNECTIVE.match(text)) or compares(text)
    if not ellipsis or has_cjk(text) or any(t in _PRONOUNS for t in tokens):
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


def _bare_entity(core: str, new_words: list[str]) -> list[str]:
    """The one word a bare ellipsis names ("and growth?", "what about the premium plan?"): the thing the
    follow-up now asks about in place of the previous question's name."""
    if len(new_words) > 2 or _CONDITION.match(core) or any(t in _PRONOUNS for t in raw_tokens(core)):
        return []
    return new_words[:1]


def asks_for_something_else(question: str, history: Sequence[Turn]) -> bool:
    """Whether a follow-up asks for what the previous answer did not say: what comes next ("and then?",
    "and if I don't?"), or the same question about someone or something else ("and for contractors?"). Its
    answer does not lead with the sentence the thread was just told (bot.agent.answering, `avoid`)."""
    if asks_what_next(question):
        return True
    previous = [t.text for t in history[-MAX_HISTORY_TURNS:] if t.role == "user" and t.text.strip()]
    if not previous or has_cjk(question) or not _CONNECTIVE.match(question):
        return False
    core = _CONNECTIVE.sub("", question).strip()
    if _CONDITION.match(core) or any(t in _PRONOUNS for t in raw_tokens(_EXISTENTIAL_THERE.sub(" ", core))):
        return False  # "and after five years?" narrows the same question; "and who led it?" asks about it
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
