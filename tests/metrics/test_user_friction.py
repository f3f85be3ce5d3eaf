"""D5 `user_friction`: what a user message says about the reply before it."""

import pytest

from tracing_eval.metrics.deterministic.similarity import words
from tracing_eval.metrics.deterministic.user_friction import CUE_WORDS, UserFriction, flags_for, shouting
from tracing_eval.model import MetricResult, Scope, Status, Thread
from tracing_eval.transcripts import thread_from_messages

NEUTRAL = "Okay, let me look into that for you."


def chat(*texts: str) -> Thread:
    return thread_from_messages(
        "t", [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(texts)]
    )


def run(*texts: str) -> tuple[dict[int, MetricResult], MetricResult]:
    """Alternating user / assistant texts, starting with the user."""
    results = UserFriction().evaluate(chat(*texts))
    turns = {r.turn_index: r for r in results if r.scope == Scope.TURN}
    [thread] = [r for r in results if r.scope == Scope.THREAD]
    return turns, thread


def flags_of(user: str, reply: str = NEUTRAL) -> list[str]:
    """Flags of one follow-up message answering `reply`."""
    turns, _ = run("I need help with a booking.", reply, user, NEUTRAL)
    return turns[1].evidence["flags"]


def test_calm_thread_has_no_friction() -> None:
    turns, thread = run(
        "I need to change my flight.",
        NEUTRAL,
        "It's the one on May 20 to Seattle.",
        NEUTRAL,
        "Thanks, that works.",
        NEUTRAL,
    )
    assert (thread.label, thread.score, thread.passed) == ("none", 1.0, True)
    assert all(r.label == "none" and r.passed for r in turns.values())


@pytest.mark.parametrize("text", ["thanks so much!!!", "Thank you!!!", "THANK YOU SO MUCH!!!", "Great!!! Bye"])
def test_thanks_and_exclamation_marks_are_not_friction(text: str) -> None:
    assert flags_of(text) == []


def test_asking_to_check_the_price_again_after_a_normal_reply_is_not_friction() -> None:
    assert flags_of("check the price again?", "The fare is $120 for the 9 am flight.") == []


def test_asking_to_try_again_after_a_failure_is_a_retry() -> None:
    reply = "Sorry, I couldn't find any flights on that day."
    assert flags_of("Can you check again? It has to be Friday.", reply) == ["retry"]
    assert flags_of("I might book it again next year.", reply) == []


@pytest.mark.parametrize(
    ("reply", "text"),
    [
        ("Please confirm: a table for 4 at Sasa at 6 pm on March 1st.", "No, I need it for two people."),
        ("Playing Drive on the TV.", "No, play it on the bedroom speaker instead."),
        ("You want to leave on March 4th, correct?", "Nope, the 2nd of March."),
    ],
)
def test_saying_no_to_a_detail_and_replacing_it_is_a_correction(reply: str, text: str) -> None:
    assert flags_of(text, reply) == ["correction"]


@pytest.mark.parametrize(
    "text",
    [
        "That's not what I asked.",
        "That is not right, because I want the reservation for 4 people.",
        "You got it wrong, I said Tuesday.",
        "There must be a mistake; I am a Gold member.",
        "Are you sure there's nothing at 5 pm?",
        "That\u2019s not right, I asked for Tuesday.",
        "That won't work for me. I am planning to make the trip later today.",
        "No, that's not good, I want a compact car.",
        "You got the date wrong.",
        "Nope, wrong restaurant.",
        "What? That makes no sense.",
    ],
)
def test_disputing_the_reply_is_a_correction(text: str) -> None:
    assert "correction" in flags_of(text)


@pytest.mark.parametrize(
    ("reply", "text"),
    [
        ("Would you like me to book it?", "No, not right now."),
        ("Do you want to buy tickets?", "No, I don't want tickets for this one."),
        ("Is there anything else I can help with?", "No, that's all. Thank you!"),
        ("Do you have a price range in mind?", "No preference, I just need free parking."),
        ("Shall I reserve it for 7 pm?", "No thanks, I'll call them myself."),
        ("Should I add the visit to your calendar?", "No, forget it."),
    ],
)
def test_declines_closings_and_answers_are_not_corrections(reply: str, text: str) -> None:
    assert flags_of(text, reply) == []


@pytest.mark.parametrize(
    "text",
    [
        "I already told you my order number.",
        "Like I said, it's the Seattle flight.",
        "NO! I said 16:45.",
        "It's for my mother, as I mentioned.",
        "As I explained, the refund never arrived.",
        "You already asked me that.",
        "But you just said the hotel has parking!",
    ],
)
def test_reminders(text: str) -> None:
    assert "reminder" in flags_of(text)


def test_repeating_the_last_request_unprompted_is_a_repeat() -> None:
    turns, thread = run(
        "I want to cancel my flight to Seattle tomorrow.",
        "Our baggage allowance is two bags.",
        "I want to cancel my flight to Seattle tomorrow!",
        NEUTRAL,
    )
    assert turns[1].evidence["flags"] == ["repeat"]
    assert (thread.score, thread.evidence["flagged_turns"]) == (0.0, [1])


def test_confirmations_answers_to_a_reask_and_asks_for_other_options_are_not_repeats() -> None:
    turns, _ = run(
        "Please change my seat to 12A.",
        "Shall I go ahead?",
        "Yes, please proceed with the change.",
        "Done?",
        "Yes, please proceed with the change.",
        "Could you confirm your reservation number?",
        "My reservation number is ZFA04Y, seat 12A please.",
        "Here is one option.",
        "Please find me other hotels in the centre.",
        "Here is another option.",
        "Please find me other hotels in the centre.",
        NEUTRAL,
    )
    assert all(r.evidence["flags"] == [] for r in turns.values())


def test_annoyance_at_the_assistant_is_frustration_but_not_at_the_world() -> None:
    assert flags_of("This is useless, you are not listening.") == ["frustration"]
    assert flags_of("I'm really frustrated because my flight was delayed.") == []
    assert flags_of("Nope, yet again you fail.") == ["frustration"]
    assert flags_of("I'm sorry, I don't understand what you mean. I need a hotel.") == ["frustration"]
    assert flags_of("Did you fail the exam?") == []
    assert flags_of("It won't work without a charger, will it?") == []
    for text in (
        "That doesn't help me at all.",
        "Seriously? Again?",
        "Why do you keep asking me the same thing?",
        "You're repeating yourself.",
        "Stop repeating yourself.",
        "It's still not working.",
        "Can you please actually answer my question?",
        "You didn't answer my question.",
    ):
        assert flags_of(text) == ["frustration"], text
    for text in (
        "It doesn't help that the train is late, so I need a later table.",
        "Does that make sense for a family of four?",
        "Seriously, thanks a lot for sorting this out.",
        "I keep forgetting my password, can you send the reset link?",
        "Is the pool still not working at the hotel?",
    ):
        assert flags_of(text) == [], text


@pytest.mark.parametrize(
    "text",
    [
        "Get me a human.",
        "Transfer me to customer service.",
        "Connect me with support.",
        "Is there a human I can talk to?",
    ],
)
def test_asking_for_a_person_in_other_words_is_escalation(text: str) -> None:
    assert flags_of(text) == ["escalation"]


@pytest.mark.parametrize(
    ("text", "flag"),
    [
        ("Still not right.", "correction"),
        ("You're still getting it wrong.", "correction"),
        ("Again, it's for 4 people, not 2.", "reminder"),
    ],
)
def test_more_corrections_and_reminders(text: str, flag: str) -> None:
    assert flag in flags_of(text)
    assert flags_of("Again, thanks for your help!") == []


@pytest.mark.parametrize(
    ("text", "flag"),
    [
        ("You booked the wrong day, I wanted Saturday.", "correction"),
        ("You've picked the wrong hotel.", "correction"),
        ("I've told you three times already.", "reminder"),
        ("How many times do I have to say it?", "reminder"),
        ("I said it two times: 4411.", "reminder"),
        ("How many times have I told you?", "reminder"),
        ("Why is this so hard?", "frustration"),
        ("Did you even read my message?", "frustration"),
        ("Never mind, you clearly can't help.", "frustration"),
        ("OMG this is taking forever.", "frustration"),
        ("This isn't helpful at all.", "frustration"),
        ("That wasn't very helpful.", "frustration"),
        ("That doesn't answer my question.", "frustration"),
        ("You keep suggesting the same thing.", "frustration"),
        ("That's the same hotel you suggested before.", "frustration"),
        ("That's not the time I wanted.", "correction"),
        ("Those aren't the seats I booked.", "correction"),
        ("Hmm, that's not quite right.", "correction"),
        ("I don't think you understood me.", "correction"),
        ("Why would you say that? I'm still here.", "correction"),
        ("You're lying.", "frustration"),
        ("No you were not. Why are you lying?", "frustration"),
        ("Are you lying to me?", "frustration"),
        ("You lied to me about the fee.", "frustration"),
        ("Why are you so obsessed with U.S. presidents?", "frustration"),
        # what the reply gave did not work (version 8)
        ("That didn't work.", "correction"),
        ("This code doesn't even compile.", "correction"),
        ("You didn't fix anything.", "correction"),
        ("It's still broken.", "correction"),
        ("Still getting the same error.", "correction"),
        ("Same error as before.", "correction"),
        ("That's the same answer you gave me before.", "frustration"),
        ("Why is it still not working?", "frustration"),
        ("wtf does that even mean", "frustration"),
        ("I've asked you this three times.", "reminder"),
    ],
)
def test_other_ways_to_correct_remind_and_show_annoyance(text: str, flag: str) -> None:
    assert flags_of(text) == [flag]


@pytest.mark.parametrize(
    "text",
    [
        "I've told my wife already, she's fine with it.",
        "Why is it so hard to find parking there?",
        "It's taking so long to decide, sorry!",
        "My flight is taking forever to board, can you check the gate?",
        "Did you read the news today?",
        "Did you read my email about the refund?",
        "How many times a day does the bus run?",
        "How many times do I need to take it?",
        "The doctor said two times a day.",
        "It isn't useful to book this early, is it?",
        "Is that the same hotel you recommended?",
        "Can I get the same one you suggested earlier?",
        "Does that answer include the taxes?",
        "That's not the hotel I stayed at last time, but it looks nice.",
        "It isn't quite ready yet, I'll write again tomorrow.",
        "I don't think you'll believe how nice the view was.",
        "Why would you recommend the Hilton over the Marriott?",
        "Why do you like music?",
        "I was lying on the beach all day.",
        "Are you lying down?",
        "My kids are obsessed with that show.",
        "My old laptop is still broken, so I'm on my phone.",
        "You didn't change the README, right? Good.",
        "Why is it still called Python 3?",
        "Is this the same error as the one in the docs?",
        "That didn't stop me from trying!",
        "Does the same problem happen on Windows?",
    ],
)
def test_the_same_words_about_something_else_are_no_friction(text: str) -> None:
    assert flags_of(text) == []


@pytest.mark.parametrize(
    ("reply", "text"),
    [
        ("I have a table for 2 at 7pm on Friday.", "Nope, 8pm not 7pm."),
        ("I have a table for 2 at 7pm on Friday.", "I meant Saturday, not Friday."),
        ("Do you want me to book for Friday?", "Er, I actually needed that train on Sunday, not Friday."),
        ("I found flights to London on Friday.", "I want to fly to Paris, not London."),
        ("Your stay begins on March 1st. Anything else?", "It should begin on the 11th not the 1st."),
    ],
)
def test_a_value_put_in_place_of_one_the_reply_stated_is_a_correction(reply: str, text: str) -> None:
    assert flags_of(text, reply) == ["correction"]


@pytest.mark.parametrize(
    ("reply", "text"),
    [
        ("Would Tuesday work?", "Okay, not Tuesday then, Wednesday works."),  # no value put in its place
        ("Flights to Paris or London?", "Paris, not London."),  # the reply named both: an answer
        ("I found flights to London.", "I'm not sure about London."),
        ("Rain is expected on Friday.", "Whether or not it rains, we go Friday."),
        ("Would you like to book for Friday?", "Thanks. Not now."),
    ],
)
def test_a_value_the_reply_did_not_state_wrongly_is_no_correction(reply: str, text: str) -> None:
    assert "correction" not in flags_of(text, reply)


def test_asking_for_a_human_counts_only_when_no_transfer_was_offered() -> None:
    assert flags_of("Can I talk to a human?") == ["escalation"]
    offered = "I can't change that. Would you like me to transfer you to a human agent?"
    assert flags_of("Yes, please transfer me to a human agent.", offered) == []


def test_shouting_needs_enough_capital_letters_and_is_not_thanks() -> None:
    assert shouting("WHY IS MY REFUND NOT HERE YET")
    assert not shouting("My ID is ZFA04Y")
    assert not shouting("OK")
    assert not shouting("THANK YOU SO MUCH")


def test_the_opening_message_is_never_flagged_and_not_counted() -> None:
    turns, thread = run("I'm so frustrated, this is useless!!!", NEUTRAL, "My reservation is ZFA04Y.", NEUTRAL)
    assert turns[0].evidence == {"flags": [], "counted_in_rate": False}
    assert turns[0].reason == "the opening message reacts to no reply"
    assert (thread.score, thread.label) == (1.0, "none")


def test_rate_counts_follow_up_turns_only() -> None:
    turns, thread = run(
        "Book me a table for two.",
        "Please confirm: a table for 4 at 7 pm.",
        "No, it's for two people.",
        NEUTRAL,
        "Great, and is there parking?",
        NEUTRAL,
    )
    assert [turns[i].passed for i in (0, 1, 2)] == [True, False, True]
    assert (thread.score, thread.evidence["friction_rate"], thread.evidence["flagged_turns"]) == (0.5, 0.5, [1])
    assert thread.evidence["flags"] == [{"turn": 1, "flags": ["correction"]}]


def test_a_message_in_another_language_is_not_applicable() -> None:
    results = UserFriction().evaluate(
        chat(
            "I need to change my booking.",
            NEUTRAL,
            "Das ist nicht die Buchung, die ich wollte, und ich bin wirklich sauer.",
            NEUTRAL,
        )
    )
    [turn] = [r for r in results if r.turn_index == 1]
    assert turn.status == Status.NOT_APPLICABLE and "de" in (turn.reason or "")
    assert results[-1].status == Status.NOT_APPLICABLE


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("Dit is niet de boeking die ik wilde, ik heb het al gezegd.", "nl text"),
        ("Ouvre la porte, s'il te plaît, je suis dehors.", "fr text"),
        ("donde esta el cuarto de bano?", "es text"),
        ("不对，我要的是明天的航班。", "cjk script"),
        ("Это не то, что я просил.", "cyrillic script"),
    ],
)
def test_a_language_or_script_the_lexicon_does_not_read_is_not_applicable(text: str, why: str) -> None:
    results = UserFriction().evaluate(chat("I need to change my booking.", NEUTRAL, text, NEUTRAL))
    [turn] = [r for r in results if r.turn_index == 1]
    assert turn.status == Status.NOT_APPLICABLE and (turn.reason or "").startswith(why)


def test_a_web_address_is_no_word_of_another_language() -> None:
    results = UserFriction().evaluate(
        chat("I need to change my booking.", NEUTRAL, "https://na.example.com/en-us/", NEUTRAL)
    )
    [turn] = [r for r in results if r.turn_index == 1]
    assert turn.status == Status.OK


def test_the_language_guess_is_the_shared_one() -> None:
    """One guesser for the tier: `user_friction` and `response_hygiene` read `languages`."""
    from tracing_eval.metrics.deterministic import languages, response_hygiene, user_friction

    assert response_hygiene.latin_language is languages.latin_language
    assert user_friction.uncovered_language is languages.uncovered_language
    assert "response_hygiene" not in user_friction.__dict__


def test_a_retry_is_read_per_sentence() -> None:
    failed = "Sorry, I couldn't find any tables at that time."
    assert "retry" in flags_of("That's odd. Can you check again?", failed)
    assert "retry" not in flags_of("I will check again later. Thanks for looking.", failed)


def test_single_user_turn_gets_a_turn_result_and_no_thread_rate() -> None:
    results = UserFriction().evaluate(chat("HELP ME NOW PLEASE", "Sure."))
    assert [(r.scope, r.label) for r in results if r.status == Status.OK] == [(Scope.TURN, "none")]
    assert results[-1].status == Status.NOT_APPLICABLE


def test_no_user_messages_is_not_applicable() -> None:
    [result] = UserFriction().evaluate(Thread(key="empty"))
    assert result.status == Status.NOT_APPLICABLE


@pytest.mark.parametrize(
    "text",
    [
        "that isn't right",
        "there's been a mix-up",
        "I never said that",
        "I don't believe you",
        "Please re-check it",
        "could you double-check?",
        "try harder",
        "keep looking please",
        "why can't you just book it",
        "I'm getting annoyed",
        "Put me through to a supervisor",
        "for the second time, it's 4411",
        "as I wrote before",
        "seriously?",
        "stop repeating yourself",
        "you didn't answer my question",
        "that makes no sense",
        "why is this so hard",
        "this is taking forever",
        "how many times do i have to say it",
        "this isn't useful",
        "that's the same one you suggested",
        "this is the second time I'm asking",
        "you're not being helpful",
        "still wrong",
        "forget it, I'll do it myself",
        "hello? are you there?",
        "are you still there?",
        "why would you say that",
        "you lied",
        "why are you obsessed with it",
        "that didn't work",
        "still broken",
        "same error again",
        "wtf",
        "that's the same one you gave me",
    ],
)
def test_the_cue_word_shortcut_never_hides_a_cue(text: str) -> None:
    plain = frozenset(words(text))
    assert not plain.isdisjoint(CUE_WORDS)
    reply = "Sorry, I couldn't find it. Please confirm: order 4410?"
    assert flags_for(text, reply, [], frozenset(), plain) == flags_for(text, reply, [], frozenset(), None) != []


@pytest.mark.parametrize(
    ("text", "flag"),
    [
        # terse complaints of coding and support assistants' users (version 9)
        ("didn't work", "correction"),
        ("I tried it, it didn't work.", "correction"),
        ("didn't fix it", "correction"),
        ("still doesn't work", "correction"),
        ("still not working", "correction"),
        ("it still fails", "correction"),
        ("I still get the same error", "correction"),
        ("still getting errors", "correction"),
        ("the error is still there", "correction"),
        ("still the same", "correction"),
        ("nothing changed", "correction"),
        ("you broke it", "correction"),
        ("You made it worse.", "correction"),
        ("it's even worse now", "correction"),
        ("you changed the wrong file", "correction"),
        ("you didn't do what I asked", "correction"),
        ("That's false.", "correction"),
        ("You're just making stuff up.", "correction"),
        ("that's not my order", "correction"),
        ("not the right answer", "correction"),
        ("totally wrong", "correction"),
        ("didn't help", "frustration"),
        ("not helpful at all", "frustration"),
        ("This is pointless.", "frustration"),
        ("you aren't helping", "frustration"),
        ("you're not getting it", "frustration"),
        ("you still don't get it", "frustration"),
        ("You're confused.", "frustration"),
        ("are you ignoring me", "frustration"),
        ("you ignored my instructions", "frustration"),
        ("you're wasting my time", "frustration"),
        ("why won't you answer", "frustration"),
        ("read my question again", "frustration"),
        ("answer my question", "frustration"),
        ("ugh", "frustration"),
        ("come on!", "frustration"),
        ("again??", "frustration"),
        ("for god's sake", "frustration"),
        ("I've already given you my email", "reminder"),
        ("I gave you my order number already", "reminder"),
        ("third time asking", "reminder"),
        ("i want a human", "escalation"),
        ("customer service please", "escalation"),
        ("is there a real person", "escalation"),
    ],
)
def test_terse_and_coding_assistant_complaints(text: str, flag: str) -> None:
    assert flags_of(text) == [flag]
    plain = frozenset(words(text))
    assert not plain.isdisjoint(CUE_WORDS)  # the cue-word shortcut does not hide it


@pytest.mark.parametrize(
    "text",
    [
        "You're not wrong.",
        "it's not wrong",
        "wrong number? no, it's right",
        "It's a false alarm, ignore it.",
        "It didn't run on Sunday, so we took a taxi.",
        "It doesn't work without a charger, does it?",
        "No, it doesn't work.",  # answers a question about the user's device
        "I didn't know that, thanks.",
        "it works now, thanks",
        "Is the pool still not working?",
        "The app is still crashing after the update.",
        "Do I get the same result with pandas?",
        "stupid me, I forgot my password",
        "I'm so dumb, I forgot the attachment.",
        "Sorry for the dumb question.",
        "I talked to an agent yesterday and they said I'd get a refund.",
        "I was transferred to a manager last week.",
        "Well, you're chatting with a human now!",
        "I have already sent in my ballot.",
        "As I said on the phone yesterday, the order is late.",
        "Like I said in my email, the parcel never came.",
        "Come on Tuesday if you can.",
        "Again, thanks so much!",
        "I still need a hotel.",
        "That's helpful, you've been so helpful.",
        "Nothing else, thanks.",
    ],
)
def test_look_alikes_of_the_terse_complaints_are_no_friction(text: str) -> None:
    assert flags_of(text, "Does your phone turn on at all?") == []


@pytest.mark.parametrize(
    ("reply", "text", "flags"),
    [
        ("Your table is booked for Thursday at 7 pm.", "No, Tuesday.", ["correction"]),
        ("I opened config.py for you.", "No, the other file.", ["correction"]),
        ("I opened config.py for you.", "Not that one.", ["correction"]),
        ("Would you like the Thursday slot?", "No, Tuesday.", []),  # answers an offer
        ("Have you ever played for a college team?", "No, too good for the other players.", []),
    ],
)
def test_no_and_a_day_or_the_other_one_corrects_a_stated_detail(reply: str, text: str, flags: list[str]) -> None:
    assert flags_of(text, reply) == flags


@pytest.mark.parametrize(
    ("text", "shouts"),
    [
        ("SELECT * FROM USERS WHERE STATUS = 'ACTIVE'", False),
        ("set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY", False),
        ("GET /API/USERS RETURNS NOTHING", False),
        ("run `DROP TABLE CUSTOMERS` please", False),
        ("UPDATE ME ON MY REFUND NOW", True),
        ("/ARE YOU GOOD AT MATH//", True),
        ("WHERE IS MY REFUND", True),
    ],
)
def test_code_and_identifiers_in_capitals_are_not_shouting(text: str, shouts: bool) -> None:
    assert shouting(text) is shouts
