"""The offline condenser on general thread shapes found by the enlarged company dev set (benchmarks/company/
questions/threads.jsonl): a thread's state is its last standalone question, a message can say it starts a new
one, and a message can point back without a pronoun ("the form", "meanwhile")."""

from __future__ import annotations

from bot.agent.condense import asks_what_next, condense_offline, is_follow_up, refers_back, switches_topic
from bot.agent.models import Turn


def thread(*turns: str) -> list[Turn]:
    """User and assistant turns, alternating, the user first."""
    return [Turn("user" if i % 2 == 0 else "assistant", text) for i, text in enumerate(turns)]


def test_a_pronoun_after_a_follow_up_stands_for_the_threads_thing_not_the_follow_ups_words() -> None:
    # It was "how do i claim it (spend)": the previous turn, itself a follow-up, was taken as it was typed.
    history = thread(
        "how much is the wellness stipend?",
        "Wellness stipend: $60 per month for gym memberships or fitness classes. [1]",
        "what can i spend it on?",
        "Gym memberships, fitness classes, sports equipment or meditation apps. [1]",
    )
    assert condense_offline("how do i claim it?", history) == "how do i claim the wellness stipend?"


def test_the_previous_questions_amounts_are_not_carried_into_a_new_question() -> None:
    # "how long until i get the money (10000)" was refused: "the knowledge base never mentions 10000".
    history = thread(
        "who approves an expense claim of 5000?",
        "Your manager and your department head. [1]",
        "what about for an expense claim of 10000?",
        "Manager, department head and the VP Finance; money arrives within 10 business days of approval. [1]",
    )
    rewrite = condense_offline("how long until i get the money?", history)
    assert "10000" not in rewrite and "5000" not in rewrite
    assert "expense claim" in rewrite, rewrite


def test_a_message_that_says_it_changes_topic_is_asked_as_it_stands() -> None:
    history = thread("how do i roll back a deploy?", "lumen-ship rollback dispatch-api --to <release-id> [1]")
    markers = ("unrelated, but", "different topic:", "separate question:", "btw", "by the way,", "ok separate thing,")
    for marker in (*markers, "okay, unrelated:", "so btw"):
        assert switches_topic(f"{marker} how long is one on-call rotation?")
        assert condense_offline(f"{marker} how long is one on-call rotation?", history) == (
            "how long is one on-call rotation?"
        )
    assert not switches_topic("unrelated?")  # nothing after the marker: not a question of its own
    assert not is_follow_up("btw what's the dress code?")


def test_a_pronouns_word_after_a_determiner_names_a_thing() -> None:
    # "and the it call?" became "the time call?": "it" was replaced by what the previous question asked about.
    rewrite = condense_offline("and the it call?", thread("what time is the welcome session on day one?"))
    assert "it call" in rewrite and "time call" not in rewrite, rewrite


def test_a_pronoun_inside_a_contraction_is_a_pronoun() -> None:
    assert is_follow_up("what should we watch until it's done?")
    rewrite = condense_offline("what should we watch until it's done?", thread("how long does the rebuild take?"))
    assert "rebuild" in rewrite, rewrite


def test_a_word_that_points_back_or_a_noun_the_thread_just_used_makes_a_follow_up() -> None:
    offline = thread("how long can the driver app work offline?", "Up to 72 hours before it requires a sync. [1]")
    assert refers_back("what happens to the photos taken meanwhile?", offline)
    assert "offline" in condense_offline("what happens to the photos taken meanwhile?", offline)
    abroad = thread("can i work from abroad?", "Submit the Work From Anywhere form (WFA-2) in the People portal. [1]")
    assert refers_back("how early do i have to file the form?", abroad)
    assert "abroad" in condense_offline("how early do i have to file the form?", abroad)
    # A definite noun the thread did not use is a question of its own.
    assert not refers_back("what's the dress code at the austin office?", abroad)
    assert condense_offline("how early do i file the taxes?", abroad) == "how early do i file the taxes?"


def test_of_two_names_the_one_the_answer_never_writes_in_lower_case_is_swapped() -> None:
    # "Read Vehicles" is a label: "vehicles" is also written in lower case, "Samsara" never is. It was
    # "verizon (samsara integration match vehicles)", answered with Samsara's sentences.
    history = thread(
        "how does the samsara integration match vehicles?",
        "Vehicles are matched by VIN. [1] Create a Samsara API token with the scopes Read Vehicles and Read "
        "Locations. [1] One Samsara connection supports up to 500 vehicles. [1]",
    )
    assert condense_offline("what about verizon?", history) == "how does the verizon integration match vehicles?"


def test_a_question_of_its_own_after_an_ellipsis_reads_the_ellipsis_as_it_stood_alone() -> None:
    # It was "does it include taxes (berlin)": the previous turn, itself an ellipsis, was taken as it was typed.
    history = thread(
        "what's the hotel cap in london?",
        "Tier 1 New York, San Francisco, London, Zurich $260 [1]",
        "and in berlin?",
        "Tier 2 Austin, Amsterdam, Rotterdam, Berlin, Chicago $190 [1]",
    )
    assert condense_offline("does it include taxes?", history) == "does the hotel cap in berlin include taxes?"


def test_a_question_that_points_back_keeps_its_own_words() -> None:
    # Pointing back adds the thread's words; it does not make the question an ellipsis whose words are swapped
    # ("was the film popular" became "Did the film sell well").
    history = thread("did the book sell well", "The book sold a million copies, and the film followed. [1]")
    assert condense_offline("was the film popular", history) == "was the film popular (book sell well)"


def test_in_a_thread_about_a_named_subject_a_definite_noun_is_the_subjects() -> None:
    # CANARD: "the band" in a thread about Biffy Clyro is theirs; the previous question's words would not say so.
    history = thread(
        "Tell me about the band Biffy Clyro",
        "Biffy Clyro are a Scottish rock band. [1]",
        "Was the band popular during this time",
        "Yes, the band was popular. [1]",
    )
    assert condense_offline("Is the band still together?", history) == "Is the band still together?"


def test_a_pronoun_the_previous_question_used_too_is_not_the_answers_name() -> None:
    # It was "what happens when Growth ends?": "it" was the trial in both questions, not the plan the answer named.
    history = thread(
        "how long is the free trial?",
        "Every new account starts with a 14-day free trial of the Growth plan. [1]",
        "which plan is it on?",
        "Every new account starts with a 14-day free trial of the Growth plan. [1]",
    )
    assert condense_offline("what happens when it ends?", history) == "what happens when the free trial ends?"


def test_what_happens_after_an_event_it_names_is_not_the_bare_next_step() -> None:
    # It was "What happens after webhook retries go?": the event the question named ("the last one fails") was lost.
    assert asks_what_next("what happens after?") and asks_what_next("and what happens after that?")
    assert not asks_what_next("what happens after the last one fails?")
    history = thread(
        "how long do webhook retries go on for?", "Failed deliveries are retried up to 8 times over 24 hours. [1]"
    )
    rewrite = condense_offline("what happens after the last one fails?", history)
    assert rewrite.startswith("what happens after the last one fails") and "webhook" in rewrite, rewrite


def test_a_pronoun_chain_takes_only_a_thing_the_first_question_asked_about() -> None:
    # MTRAG: "how did it end?" became "how did a different name end?" — the first noun phrase of a yes/no question
    # is not what its pronouns stand for.
    history = thread(
        "did the war have a different name?",
        "It was also called the Great War. [1]",
        "when did it start?",
        "It started in 1914. [1]",
    )
    assert "different name" not in condense_offline("how did it end?", history)


def test_a_question_that_names_its_own_subject_does_not_point_back() -> None:
    # MTRAG: "the key aspects" shares "key" with "a session key", but the question names what it asks about.
    history = thread("how is a session key exchanged between a client and server?", "With a TLS handshake. [1]")
    question = "Could you shed light on the key aspects of the power wielded by the Prime Minister's office?"
    assert not refers_back(question, history)
    assert condense_offline(question, history) == question


def test_a_message_that_says_what_happened_then_asks_about_it_is_a_question_of_its_own() -> None:
    history = [
        Turn("user", "How does the company match 401k contributions?"),
        Turn("assistant", "The company matches 100% of the first 4% of salary you contribute. [1]"),
    ]
    stated = "A customer is getting unroutable_address back from the API - what does that mean?"
    assert not is_follow_up(stated)
    assert condense_offline(stated, history) == stated
    assert not is_follow_up("I got error E42 on the payroll export, what does it mean?")
    # Too little said before the pronoun to be what it points at: still the thread's thing.
    assert is_follow_up("if I leave, do I lose it?")
    assert "contributions" in condense_offline("How often should I check it?", history)


def test_that_as_the_subject_of_a_do_question_is_a_pronoun_but_that_before_a_noun_is_a_determiner() -> None:
    # "does that include the wine?" was "does that include the wine (limit taking client dinner)": "that" before
    # "include" was read as "that include", a determiner, and nothing was resolved.
    history = thread(
        "what's the limit for taking a client to dinner?",
        "Client entertainment is reimbursed up to $120 per person, including drinks, tax and tip. [1]",
    )
    rewrite = condense_offline("does that include the wine?", history)
    assert rewrite == "does the limit for taking a client to dinner include the wine?", rewrite
    assert condense_offline("does that count?", history) == "does the limit for taking a client to dinner count?"
    # Here a verb follows the word after "that": "that card" is a determiner phrase, not the thread's limit.
    assert condense_offline("does that card cover the wine?", history).startswith("does that card cover the wine")


def test_a_bare_qualifying_phrase_is_the_previous_question_qualified() -> None:
    # "even on weekends?" was searched as it stood (no verb, one content word too many for an ellipsis): cosine 0.13.
    history = thread("when can we ship to production?", "Production deploys are allowed Monday to Thursday. [1]")
    for fragment in ("even on weekends?", "per quarter?", "only during business hours?"):
        assert is_follow_up(fragment)
        rewrite = condense_offline(fragment, history)
        assert rewrite.startswith("when can we ship to production") and fragment.rstrip("?") in rewrite, rewrite
    assert not is_follow_up("for contractors, what is the notice period for leave?")  # asks its own question


def test_a_bare_how_long_after_a_yes_no_question_asks_that_question_how_long() -> None:
    # It was "for how long (work abroad entity)": the bracketed words lost what the "how long" was about.
    history = thread("can i work abroad from a country with no lumen office?", "Yes, for a limited time. [1]")
    assert (
        condense_offline("for how long?", history)
        == "for how long can i work abroad from a country with no lumen office?"
    )
    assert (
        condense_offline("and how often?", thread("do we review alerts?", "Yes. [1]"))
        == "how often do we review alerts?"
    )
    # After a question that already asks how much, nothing is turned around.
    assert not condense_offline(
        "how long?", thread("what is the sabbatical policy?", "Up to 3 months. [1]")
    ).startswith("how long what")


def test_a_duty_question_that_names_nothing_asks_about_the_threads_thing() -> None:
    # "do i need to do anything?" after "what does INT-401 mean?" was searched alone (cosine 0.08).
    history = thread("what does INT-401 mean?", "The partner system rejected the stored credentials. [1]")
    rewrite = condense_offline("do i need to do anything?", history)
    assert "INT-401" in rewrite, rewrite
    own = "do we have to register the laptop with the security team before travelling abroad?"
    assert condense_offline(own, history) == own  # enough words of its own: asked as it is


def test_a_condition_that_states_a_sum_replaces_the_sum_asked_before() -> None:
    # It was "who approves an expense claim of $1,500 if it's over 7,500?": two sums, the old one first.
    history = thread("who approves an expense claim of $1,500?", "Your manager. [1]")
    assert condense_offline("and if it's over 7,500?", history) == "who approves an expense claim if it's over 7,500?"
    assert condense_offline("over 9k?", history) == "who approves an expense claim over 9k?"
    # A condition without a sum keeps it, and a year is no sum.
    assert "$1,500" in condense_offline("what if it's for a client dinner?", history)
    sick = thread("how many days of sick leave do I get in 2026?", "10 days. [1]")
    assert "2026" in condense_offline("what if I work 4 days a week?", sick)
