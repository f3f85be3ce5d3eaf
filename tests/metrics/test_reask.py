"""D2 `reask`: the §9 cases of metrics.md, one case per slot type, and the passing kinds of ask."""

from typing import Any

import pytest

from tracing_eval.metrics.deterministic.reask import Reask, find_asks
from tracing_eval.model import MetricResult, Scope, Status, Thread
from tracing_eval.transcripts import thread_from_messages


def chat(*texts: str) -> Thread:
    return thread_from_messages(
        "t", [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(texts)]
    )


def thread_result(thread: Thread) -> MetricResult:
    results = Reask().evaluate(thread)
    [result] = [r for r in results if r.scope == Scope.THREAD]
    return result


def turn_results(thread: Thread) -> dict[int, MetricResult]:
    return {r.turn_index: r for r in Reask().evaluate(thread) if r.scope == Scope.TURN}


REASK_TEXTS = (
    "Hi, my order 8841-22 hasn't arrived yet.",
    "Sorry to hear that. Could you provide your order number?",
    "It's 8841-22.",
    "Thanks! Your package is in transit with the courier.",
    "When will it arrive?",
    "Let me check. What is your order number?",
)
REASK = chat(*REASK_TEXTS)


def test_reask_fails_at_turns_zero_and_two() -> None:
    result = thread_result(REASK)
    assert (result.label, result.score, result.passed) == ("reask", 0.0, False)
    assert result.evidence["reasked_messages"] == [1, 5]
    assert result.evidence["reasks"] == [
        {"slot": "order_number", "value": "8841-22", "given_at": 0, "asked_at": 1, "turn": 0},
        {"slot": "order_number", "value": "8841-22", "given_at": 2, "asked_at": 5, "turn": 2},
    ]
    assert result.evidence["reask_rate"] == pytest.approx(2 / 3, abs=1e-4)
    turns = turn_results(REASK)
    assert sorted(turns) == [0, 2]  # only turns where the assistant asks
    assert all(r.label == "reask" and r.score == 0.0 for r in turns.values())
    assert turns[2].evidence["asks"][0]["given_turn"] == 1


def test_confirmation_passes() -> None:
    thread = chat("My order 8841-22 is late.", "Just to confirm, is your order number 8841-22 correct?", "Yes.")
    result = thread_result(thread)
    assert (result.label, result.score, result.passed) == ("none", 1.0, True)
    assert turn_results(thread)[0].evidence["asks"][0]["kind"] == "confirmation"


def test_justified_reask_passes() -> None:
    thread = chat(
        "My order 8841-22 is late.",
        "I couldn't find order 8841-22. Could you double-check the order number?",
        "Oh, it's 8841-23.",
    )
    result = thread_result(thread)
    assert (result.label, result.score) == ("none", 1.0)
    assert turn_results(thread)[0].evidence["asks"][0]["kind"] == "justified"


def test_bare_value_answering_an_ask_fills_the_slot() -> None:
    thread = chat(
        "I want to return an order that arrived damaged.",
        "Sorry about that. Can you share the order number?",
        "It's #4471.",
        "Got it. Damaged on arrival, or after use?",
        "On arrival. The screen was cracked.",
        "Understood. Replacement or refund?",
        "Refund. How long does that take?",
        "3-5 business days. Can you share the order number again?",
    )
    result = thread_result(thread)
    assert result.label == "reask"
    assert result.evidence["reasks"] == [
        {"slot": "order_number", "value": "4471", "given_at": 2, "asked_at": 7, "turn": 3}
    ]


@pytest.mark.parametrize(
    ("slot", "given", "ask", "value"),
    [
        (
            "email",
            "You can use my email jane.doe@example.com for that.",
            "Could you share your email address?",
            "jane.doe@example.com",
        ),
        ("phone", "Call me at (415) 555-0134 if needed.", "What is your phone number?", "(415) 555-0134"),
        ("zip", "My zip code is 94107.", "Could you please provide your ZIP code?", "94107"),
        ("date_of_birth", "I was born on March 3, 1990.", "Could you provide your date of birth?", "March 3, 1990"),
        ("date", "I'd like a table on May 20th.", "What date would you like?", "May 20th"),
        ("user_id", "Sure, my user ID is mia_li_3668.", "Could you please provide your user ID?", "mia_li_3668"),
        ("user_id", "I think it's sara_doe_496 but not sure.", "What is your user ID?", "sara_doe_496"),
        ("reservation_id", "The reservation ID is ZFA04Y.", "Could you provide the reservation ID?", "ZFA04Y"),
        (
            "reservation_id",
            "I want to cancel my booking, code HXDUBJ.",
            "Please provide your booking reference.",
            "HXDUBJ",
        ),
        ("account_id", "My account number is 55512345.", "What is your account number?", "55512345"),
        (
            "tracking_number",
            "The tracking number is 1Z999AA10123456784.",
            "Can you give me the tracking number?",
            "1Z999AA10123456784",
        ),
        ("name", "Hi, my name is Jane Doe.", "May I have your full name?", "Jane Doe"),
        ("order_number", "My order number is 448812.", "Can I get your order number?", "448812"),
        ("party_size", "A table for 4 people at 7 pm, please.", "And how many people will be joining?", "4"),
        ("party_size", "I need three tickets to the show.", "Sure, how many tickets?", "three"),
    ],
)
def test_each_slot_type_is_tracked(slot: str, given: str, ask: str, value: str) -> None:
    result = thread_result(chat(given, "Thanks, one moment.", "Any news?", ask))
    assert result.label == "reask", result.evidence
    [reask] = result.evidence["reasks"]
    assert (reask["slot"], reask["value"], reask["given_at"], reask["asked_at"]) == (slot, value, 0, 3)


def test_first_asks_pass() -> None:
    thread = chat(
        "I need to change a flight.",
        "Could you please provide your user ID and the reservation ID?",
        "mia_li_3668 and ZFA04Y",
    )
    result = thread_result(thread)
    assert (result.label, result.score) == ("none", 1.0)
    assert result.evidence["passed_asks"]["first"] == 2


def test_failed_tool_call_justifies_asking_again() -> None:
    thread = thread_from_messages(
        "t",
        [
            {"role": "user", "content": "My reservation ID is ZFA04Y."},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "c1",
                        "function": {"name": "get_reservation_details", "arguments": '{"reservation_id": "ZFA04Y"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "Error: reservation ZFA04Y"},
            {"role": "assistant", "content": "Could you please provide the reservation ID again?"},
        ],
    )
    assert thread_result(thread).label == "none"


def test_offering_values_to_choose_from_is_not_a_reask() -> None:
    thread = chat(
        "My reservation ID is ZFA04Y, and I have another one too.",
        "Which reservation ID would you like to cancel: HXDUBJ or K1NW8N?",
    )
    result = thread_result(thread)
    assert result.label == "none"
    assert result.evidence["passed_asks"]["choice"] == 1


def test_asking_for_a_different_value_of_the_kind_is_not_a_reask() -> None:
    thread = chat("My reservation ID is ZFA04Y.", "Thanks. Could you provide the reservation ID for the other booking?")
    assert thread_result(thread).evidence["passed_asks"]["other_value"] == 1


def test_statement_of_need_restates_a_known_slot_next_to_a_new_one() -> None:
    need = chat("My user ID is mia_li_3668.", "I'll need your user ID and the reservation ID to proceed.")
    assert thread_result(need).label == "none"
    direct = chat("My user ID is mia_li_3668.", "Please provide your user ID and the reservation ID.")
    result = thread_result(direct)
    assert result.label == "reask"
    assert [r["slot"] for r in result.evidence["reasks"]] == ["user_id"]


def test_a_value_the_user_took_back_leaves_the_ledger() -> None:
    thread = chat(
        "My reservation ID is ZFA04Y.",
        "Thanks, let me look at ZFA04Y.",
        "Sorry, that was the wrong reservation ID, I don't have the right one with me.",
        "No problem. Could you provide the reservation ID when you have it?",
    )
    assert thread_result(thread).label == "none"


def test_later_values_override_earlier_ones() -> None:
    thread = chat(
        "My order 8841-22 is late.",
        "Okay.",
        "Sorry, I meant order 9911-33.",
        "Okay.",
        "Any update?",
        "What is your order number?",
    )
    [reask] = thread_result(thread).evidence["reasks"]
    assert (reask["value"], reask["given_at"]) == ("9911-33", 2)


def test_offers_are_not_asks() -> None:
    thread = chat("My email is jane@example.com.", "Would you like me to send the receipt to your email?")
    assert find_asks(thread) == []
    thread = chat("My email is jane@example.com.", "Can I get you a copy of the invoice by email?")
    assert find_asks(thread) == []


def test_thread_without_asks_passes() -> None:
    result = thread_result(chat("Hello", "Hi! How can I help today?"))
    assert (result.label, result.score) == ("none", 1.0)
    assert result.reason == "the assistant never asked for a value"
    assert result.evidence["reask_rate"] == 0.0


def test_messages_after_the_last_ask_are_not_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ledger only matters at an ask: the walk stops at the last one, with the same results."""
    from tracing_eval.metrics.deterministic import reask

    read: list[str] = []
    reading = reask.user_reading.__wrapped__
    reask.user_reading.cache_clear()
    monkeypatch.setattr(reask, "user_reading", lambda text, elsewhere: read.append(text) or reading(text, elsewhere))
    later = ("My email is jo@example.com by the way.", "Thanks, noted. Your parcel is on its way.")
    thread = chat(*REASK_TEXTS, *later)
    result = thread_result(thread)
    assert result.evidence["reasked_messages"] == [1, 5]  # as without the later messages
    assert later[0] not in read and read == [REASK_TEXTS[0], REASK_TEXTS[2], REASK_TEXTS[4]]

    read.clear()
    assert find_asks(chat("Hello, my order is 8841-22.", "Hi! Happy to help with that.", "Thanks")) == []
    assert read == []  # no ask: nothing to keep a ledger for


@pytest.mark.parametrize(
    "messages",
    [
        [],
        [{"role": "user", "content": "anyone?"}],
        [{"role": "user", "content": "x"}, {"role": "assistant", "content": ""}],
    ],
)
def test_no_replies_is_not_applicable(messages: list[dict[str, Any]]) -> None:
    [result] = Reask().evaluate(thread_from_messages("t", messages))
    assert result.status == Status.NOT_APPLICABLE


def test_a_bare_answer_that_is_not_a_name_does_not_fill_the_name_slot() -> None:
    thread = chat("hi", "What's your name?", "Sure", "Ok... What's your name, then?")
    assert thread_result(thread).label == "none"
    named = chat("hi", "What's your name?", "Jane", "Nice. So what's your name?")
    assert thread_result(named).evidence["reasks"][0]["value"] == "Jane"


def test_value_inside_a_longer_code_and_an_unrelated_not_found_do_not_excuse_a_reask() -> None:
    """Regression: order A48213 inside tracking number 1Z84A48213... and 'address not found' from a tool."""
    from tracing_eval.metrics.deterministic.reask import Reask
    from tracing_eval.transcripts import thread_from_messages

    thread = thread_from_messages(
        "t",
        [
            {"role": "user", "content": "Hi, my order A48213 hasn't arrived yet."},
            {"role": "assistant", "content": "It shipped; tracking number 1Z84A4821300000001."},
            {"role": "user", "content": "Where is it?"},
            {"role": "tool", "content": '{"tracking_number": "1Z84A4821300000001", "detail": "address not found"}'},
            {"role": "assistant", "content": "Delivery failed: the address could not be found."},
            {"role": "user", "content": "Please resend it to 12 Elm Street."},
            {"role": "assistant", "content": "Could you please provide your order number?"},
        ],
    )
    [thread_result] = [r for r in Reask().evaluate(thread) if r.turn_index is None]
    assert thread_result.passed is False
    assert thread_result.evidence["reasked_messages"] == [6]


# --- other languages (found by hand: a Spanish re-ask scored `none`) ---

SPANISH_REASK = chat(
    "Hola, mi pedido 48213 no ha llegado todavía.",
    "Lamento escuchar eso. ¿Podría indicarme su número de pedido?",
    "Es el 48213.",
    "Gracias. Su paquete está en tránsito.",
    "¿Cuándo llegará?",
    "Déjeme revisar. ¿Cuál es su número de pedido?",
)


def test_spanish_reask_is_found() -> None:
    result = thread_result(SPANISH_REASK)
    assert (result.label, result.passed) == ("reask", False)
    assert result.evidence["reasked_messages"] == [1, 5]
    assert [r["slot"] for r in result.evidence["reasks"]] == ["order_number", "order_number"]
    assert result.evidence["reasks"][1]["given_at"] == 2  # the bare "Es el 48213." answered the first ask


def test_spanish_reask_of_a_reservation_code_and_an_email() -> None:
    thread = chat(
        "Quiero cambiar mi vuelo. Mi código de reserva es ZFA04Y y mi correo es ana@ejemplo.com.",
        "Claro. Por favor, indíqueme su código de reserva.",
        "ZFA04Y",
        "¿Me puede dar su correo electrónico?",
    )
    result = thread_result(thread)
    assert result.evidence["reasked_messages"] == [1, 3]
    assert {r["slot"]: r["value"] for r in result.evidence["reasks"]} == {
        "reservation_id": "ZFA04Y",
        "email": "ana@ejemplo.com",
    }


def test_spanish_confirmation_and_not_found_pass() -> None:
    thread = chat(
        "Hola, mi pedido 48213 no ha llegado.",
        "Para confirmar, ¿su número de pedido es 48213?",
        "Sí.",
        "No se encontró ese pedido. ¿Podría indicarme su número de pedido otra vez?",
    )
    result = thread_result(thread)
    assert (result.label, result.passed) == ("none", True)
    kinds = [a.kind for a in find_asks(thread)]
    assert kinds == ["confirmation", "justified"]


@pytest.mark.parametrize(
    "texts",
    [
        ("Bonjour, ma commande 48213 n'est pas arrivée.", "Désolé. Pourriez-vous me donner votre numéro de commande ?"),
        (
            "Hallo, meine Bestellnummer ist 48213 und sie ist nicht angekommen.",
            "Das tut mir leid. Wie lautet Ihre Bestellnummer?",
        ),
        ("Olá, meu pedido 48213 não chegou.", "Sinto muito. Poderia me informar o número do pedido?"),
        ("Ciao, il mio ordine 48213 non è arrivato.", "Mi dispiace. Potrebbe indicarmi il numero dell'ordine?"),
        # short asks, told from English by their words of asking
        ("Wo ist meine Bestellung W1234567?", "Gerne. Wie lautet Ihre Bestellnummer?"),
        ("Ma commande 48213 n'est pas arrivée.", "Quel est votre numéro de commande ?"),
        ("Meu pedido 48213 não chegou.", "Qual é o número do pedido?"),
    ],
)
def test_reask_in_french_german_portuguese_italian(texts: tuple[str, str]) -> None:
    result = thread_result(chat(*texts))
    assert (result.label, result.evidence["reasked_messages"]) == ("reask", [1])


def test_replies_in_an_uncovered_language_are_not_applicable() -> None:
    thread = chat("我的订单号是48213，还没有到。", "很抱歉。请提供您的订单号。")
    [result] = Reask().evaluate(thread)
    assert result.status == Status.NOT_APPLICABLE
    assert "cjk script" in result.reason and "covered: en, es, fr, de, pt, it" in result.reason


@pytest.mark.parametrize(
    ("given", "slot", "value"),
    [
        ("I'm Yusuf Rossi, zip code 19122. I need to cancel an order.", "zip", "19122"),
        ("Postcode SW1A 1AA.", "zip", "SW1A 1AA"),
        ("User id john99, please.", "user_id", "john99"),
        ("Username jsmith7 here.", "user_id", "jsmith7"),
    ],
)
def test_a_value_right_after_its_name_fills_the_slot(given: str, slot: str, value: str) -> None:
    """No "is" or ":" between the name and the value ("zip code 19122"): asking for it again is a re-ask."""
    asked = {"zip": "May I have your zip code to verify your identity?", "user_id": "Could you provide your user ID?"}
    result = thread_result(chat(given, asked[slot]))
    assert result.label == "reask"
    assert [(r["slot"], r["value"]) for r in result.evidence["reasks"]] == [(slot, value)]


def test_a_count_after_login_is_no_user_id() -> None:
    result = thread_result(chat("I tried to login 3 times and it failed.", "Sorry about that. What's your user ID?"))
    assert result.label == "none"


def test_the_whole_reply_gate_never_hides_an_ask() -> None:
    """`sentence_asks` skips replies that name no slot anywhere; every reply of the labelled sets with
    a sentence that names one passes the gate (English, and the other languages when `elsewhere`)."""
    import json

    from tests.conftest import DATASETS
    from tracing_eval.metrics.deterministic import slots

    replies = [
        m["content"]
        for name in ("tau_airline_gpt4o.jsonl", "uss_sgd_mwoz.jsonl")
        for line in (DATASETS / name).read_text().splitlines()
        for m in json.loads(line)["turns"]
        if m["role"] == "assistant" and m.get("content")
    ] + ["Bonjour. Quel est votre numéro de commande ?", "¿Cuál es su código postal?", "Wie lautet Ihre Bestellnummer?"]
    named = 0
    for text in replies:
        for elsewhere in (False, True):
            if any(slots.named_slots(s, elsewhere=elsewhere) for s in slots.split_sentences(text)):
                named += 1
                assert slots.could_name_a_slot(text, elsewhere=elsewhere), text
    assert named > 1000


def test_the_request_gate_never_hides_an_ask() -> None:
    """`sentence_asks` also skips replies with no "?" and no request or need form anywhere
    (`slots.could_ask`); every reply of the labelled sets with an asking sentence passes it."""
    import json

    from tests.conftest import DATASETS
    from tracing_eval.metrics.deterministic import slots

    replies = [
        m["content"]
        for name in ("tau_airline_gpt4o.jsonl", "uss_sgd_mwoz.jsonl", "dstc9_interactive.jsonl")
        for line in (DATASETS / name).read_text().splitlines()
        for m in json.loads(line)["turns"]
        if m["role"] == "assistant" and m.get("content")
    ] + [
        "Please provide your order number.", "I'll need your user ID.", "Indíqueme su número de pedido.",
        "Bitte geben Sie Ihre Bestellnummer an.", "Your order no.\n558123 - could you confirm the email",
    ]  # fmt: skip
    asking = 0
    for text in replies:
        for elsewhere in (False, True):
            if any(slots.asked_slots(s, elsewhere=elsewhere) for s in slots.split_sentences(text)):
                asking += 1
                assert slots.could_ask(text), text
    assert asking > 1000
    assert not slots.could_ask("Your order W123 has shipped. The email confirmation is on its way.")


@pytest.mark.parametrize(
    ("texts", "kinds"),
    [
        # a bare count answers the ask; asking again in the next turn is a re-ask
        (("I need a table at 7.", "How many people?", "4", "Great. And how many guests will there be?"),
         ["first", "reask"]),
        # "three" and "3" are one count: this confirms it
        (("I want three tickets for the show.", "Please confirm the number of tickets: 3?"), ["confirmation"]),
        # a count given for one booking does not answer the ask for the next one
        (("Book the hotel for 2 people, 2 nights.", "Done. Anything else?", "Yes, a train to London.",
          "Sure. Which day?", "Friday morning.", "How many tickets do you need?"), ["first"]),
        # the ask names another service, or wants a different count
        (("A table for 4 please.", "Booked! Shall I call a taxi? How many people in the taxi?"), ["other_value"]),
        (("Two adults please.", "And how many tickets for the children?"), ["other_value"]),
        # a time is no count, and days are not people
        (("Bus tickets for 6:15 in the evening, please.", "How many tickets would you like?"), ["first"]),
        (("I need 2 tickets for later today.", "For how many days?"), []),
    ],
)  # fmt: skip
def test_party_size_is_asked_again_only_for_the_same_booking(texts: tuple[str, ...], kinds: list[str]) -> None:
    assert [a.kind for a in find_asks(chat(*texts)) if a.slot == "party_size"] == kinds


@pytest.mark.parametrize(
    ("texts", "kinds"),
    [
        # polite and indirect ways of asking (version 7)
        (("My order number is W1234567.", "Would you mind sharing your order number?"), ["reask"]),
        (("I want to cancel order W1234567", "Kindly share the order number."), ["reask"]),
        (("I want to cancel order W1234567", "Could I trouble you for the order number?"), ["reask"]),
        (("my number is 415-555-0123", "Thanks.", "I want to change my plan", "And your phone number was?"),
         ["reask"]),
        (("Please cancel reservation ZX4K9P", "Happy to help. Your confirmation code is?"), ["reask"]),
        # "order no." before a number ends no sentence: the value is read
        (("I ordered a lamp, order no. 558123, still nothing.", "Can you give me the order number?"), ["reask"]),
        # look-alikes that ask for nothing: a question about the email, a "confirmation" noun
        (("my email is ann@example.com", "Who should I address the email to?"), []),
        (("my email is ann@example.com", "Did you get the confirmation email?"), []),
        (("my phone is 415-555-0123", "There is no phone information given, can I help with anything else?"), []),
    ],
)  # fmt: skip
def test_polite_and_indirect_asks(texts: tuple[str, ...], kinds: list[str]) -> None:
    assert [a.kind for a in find_asks(chat(*texts))] == kinds


@pytest.mark.parametrize(
    ("texts", "kind"),
    [
        # the reply wrote the value, and the ask confirms it
        (("My email is ann@example.com", "I'll send the receipt to ann@example.com. Can you confirm that email?"),
         "confirmation"),
        # a bare question is no confirmation of a value written elsewhere in the reply
        (("My email is ann@example.com", "I have ann@example.com noted. What's your email?"), "reask"),
        (("My email is ann@example.com", "Thanks, noted. Can you confirm your email address?"), "reask"),
    ],
)  # fmt: skip
def test_a_confirmation_may_refer_to_the_value_its_reply_wrote(texts: tuple[str, ...], kind: str) -> None:
    assert [a.kind for a in find_asks(chat(*texts))] == [kind]


@pytest.mark.parametrize(
    ("texts", "kind"),
    [
        # the user said they have more than one value of the kind: the ask may want the other one
        (("My order number is W1234567 for the lamp. I also have a second order for a chair.",
          "What's the order number for the chair?"), "other_value"),
        (("My booking is ZX4K9P. My wife has a separate booking.", "What's the booking reference?"), "other_value"),
        (("I'm booking for my friend. Her booking reference is ZX4K9P.",
          "Could you also provide your own booking reference?"), "other_value"),
        # "another" that is not about a second value of the kind
        (("I have another question: my order W1234567 hasn't arrived", "Sure, what is the order number?"), "reask"),
        (("I'm booking for my friend. Her booking reference is ZX4K9P.",
          "Could you also provide the booking reference?"), "reask"),
    ],
)  # fmt: skip
def test_an_ask_after_the_user_said_they_have_more_than_one_wants_another_value(
    texts: tuple[str, ...], kind: str
) -> None:
    assert [a.kind for a in find_asks(chat(*texts))] == [kind]


def test_the_several_gate_names_a_piece_of_every_alternative() -> None:
    from tracing_eval.metrics.deterministic import slots
    from tracing_eval.text import alternatives

    alts = alternatives(slots.SEVERAL.pattern)
    assert alts and all(any(n in a for n in slots.SEVERAL_NEEDS) for a in alts)
    assert set(slots.SEVERAL_OF.values()) <= set(slots.SLOT_BY_NAME)
    assert slots.several("I have TWO ORDERS and another E-mail") == ("email", "order_number")
    assert slots.several("I have another question about my parcel") == ()
