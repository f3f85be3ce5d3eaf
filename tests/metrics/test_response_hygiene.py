"""D7 `response_hygiene`: empty, truncated, placeholder and language checks on every turn."""

import pytest

from tracing_eval.metrics.deterministic import response_hygiene as hygiene
from tracing_eval.metrics.deterministic.response_hygiene import (
    ResponseHygiene,
    check_turn,
    latin_language,
    script_of,
    truncated,
)
from tracing_eval.model import Message, MetricResult, Scope, Status, Thread, ToolCall, Turn
from tracing_eval.text import alternatives
from tracing_eval.transcripts import thread_from_messages


def turn(user: str, reply: str | None, finish_reason: str | None = None, index: int = 0) -> Turn:
    messages = [Message(role="user", content=user, position=2 * index)]
    if reply is not None:
        messages.append(Message(role="assistant", content=reply, finish_reason=finish_reason, position=2 * index + 1))
    return Turn(index=index, messages=messages)


def evaluate(*turns: Turn) -> tuple[dict[int, MetricResult], MetricResult]:
    results = ResponseHygiene().evaluate(Thread(key="t", turns=list(turns)))
    per_turn = {r.turn_index: r for r in results if r.scope == Scope.TURN}
    [thread] = [r for r in results if r.scope == Scope.THREAD]
    return per_turn, thread


def test_clean_reply() -> None:
    per_turn, thread = evaluate(turn("Where is my order?", "It shipped yesterday and should arrive on Friday."))
    assert (per_turn[0].label, per_turn[0].score, per_turn[0].evidence["failing"]) == ("clean", 1.0, [])
    assert (thread.label, thread.score) == ("clean", 1.0)


@pytest.mark.parametrize(
    ("reply", "finish_reason", "check"),
    [
        ("", None, "empty"),
        ("   \n ", None, "empty"),
        ("Your order shipped on", "length", "truncated"),
        ("Here are the three options you asked about, with prices and", None, "truncated"),
        ("The steps are as follows,", None, "truncated"),
        ("```python\nprint('hi')\n", None, "truncated"),
        ("Hello {{customer_name}}, your order has shipped.", None, "placeholder"),
        ("Dear [INSERT NAME], thanks for writing.", None, "placeholder"),
        ("Hi undefined, your order has shipped.", None, "placeholder"),
        ("None", None, "placeholder"),
        ("undefined", None, "placeholder"),
        ("Your total is ${total}.", None, "placeholder"),
        ("Dear {first_name}, your order has shipped.", None, "placeholder"),
        ("Your order {order_id} has been cancelled.", None, "placeholder"),
        ("Hi {user.name}!", None, "placeholder"),
        ("Hello [Customer Name], your order has shipped.", None, "placeholder"),
        ("Your refund of $[AMOUNT] is on its way.", None, "placeholder"),
        ("Please call us at [PHONE NUMBER].", None, "placeholder"),
        ("Your tracking number is <tracking_number>.", None, "placeholder"),
        ("Your order number is %s.", None, "placeholder"),
        ("Hello %(name)s, welcome back!", None, "placeholder"),
        ("Here is the snippet:\n```\nprint(1)\n```\nHello {{ user.name }}, anything else?", None, "placeholder"),
        ("See the list at https://example.com/ and,", None, "truncated"),
        ("He has earned more than any other actor in the history of", None, "truncated"),
        # a chat template's special tokens leaked by a model served with the wrong template
        ("Your order has shipped.<|im_end|>", None, "placeholder"),
        ("Your order has shipped.<|eot_id|><|start_header_id|>assistant", None, "placeholder"),
        ("Your order has shipped. [/INST] Anything else?", None, "placeholder"),
        ("Your order has shipped.<end_of_turn>", None, "placeholder"),
        # version 9: a reply that shows nothing but markup is empty
        ("```\n```", None, "empty"),
        ("**", None, "empty"),
        ("---", None, "empty"),
        ("\u200b", None, "empty"),
        (" <br> &nbsp; ", None, "empty"),
        # version 9: cut off on "if" / "as", at the next list item's number, in a table row, in a ~~~ fence
        ("that is pretty cool. i wonder if", None, "truncated"),
        ("Her death was a tragic loss for her fans, and it has been described as", None, "truncated"),
        ("Steps:\n\n1. Open the app.\n2. Tap Settings.\n3.", None, "truncated"),
        ("Steps:\n1. Open the app.\n2. Tap Settings.\n3", None, "truncated"),
        ("Tips:\n\n**1. Sleep well**\nGet eight hours.\n\n**2.", None, "truncated"),
        ("| Plan | Price |\n|---|---|\n| Basic |", None, "truncated"),
        ("| Plan | Price |\n|---|---|\n| Basic | $5", None, "truncated"),
        ("Here is the code:\n~~~python\nprint(1)\n", None, "truncated"),
        ("Here is the code:\n````md\n```\ninner\n```\n", None, "truncated"),
        # version 9: more template syntax, a greeting of a bracketed field, a missing value as an amount
        ("Hello <<name>>, your order has shipped.", None, "placeholder"),
        ("Thanks for your order, [[name]]. It has shipped.", None, "placeholder"),
        ("Hi {0}, your order {1} has shipped.", None, "placeholder"),
        ("Dear [name], your order has shipped.", None, "placeholder"),
        ("Hi [customer], thanks for waiting.", None, "placeholder"),
        ("You can reach us at [insert phone number].", None, "placeholder"),
        ("Best regards,\n[Your name]", None, "placeholder"),
        ("Best regards,\n[Your Team Name]", None, "placeholder"),
        ("Your total is $NaN.", None, "placeholder"),
        ("Your refund of \u20acundefined is on its way.", None, "placeholder"),
        ("Your appointment is on NaN/NaN/NaN.", None, "placeholder"),
    ],
)
def test_failing_checks(reply: str, finish_reason: str | None, check: str) -> None:
    per_turn, thread = evaluate(turn("Can you help me with my order please?", reply, finish_reason))
    assert check in per_turn[0].evidence["failing"]
    assert (per_turn[0].score, per_turn[0].passed) == (0.0, False)
    assert thread.evidence["failing_turns"][check] == [0]


@pytest.mark.parametrize(
    "reply",
    [
        "I want to go to Ohio with you",
        "hola. have you heard of the song by the band tamela",
        "Sure :)",
        "What city are you looking for",
        "Tell me what you are most afraid of?",
        "The behaviour is undefined in that case, so avoid it.",
        "None of the flights leave before noon.",
        "- item one\n- item two",
        "You can read the full policy at https://example.com/help/",
        "Download it from www.example.org/",
        "Put the file in /etc/tracing-eval/",
        "In Jinja you write:\n```jinja\nHello {{ user.name }}!\n```\nThe braces are filled in at render time.",
        "Use `{{ user.name }}` in the template and `${HOME}` in the shell.",
        "The probability is $\\frac{1}{2}$, and x_{i} grows like e^{x}.",
        "The set {a, b} has two elements, and the call returns {} when empty.",
        "Use `{name}` in a format string.",
        "Run git checkout [name] to switch, or replace <name> with your branch.",
        "Press [Enter] to continue; the array is [1, 2, 3].",
        "The form is here: [Link](https://example.com/form), and our [Address][1] is below.",
        "The price is 20% off, and 100%s are rare.",
        "In Python, `'%s' % name` formats a string.",
        "Use a || b for a logical or; <s>strike</s> marks deleted text in HTML.",
        "The model ends each turn with `<|im_end|>`, so strip it before display.",
        # version 9 look-alikes: finished replies that end in a mark, a capital "A", a number or a table
        "I have never seen the northern lights :(",
        "Sorry to hear that :-(",
        "The best option for you is Plan A",
        "Nope, I am from the U S of A",
        "You can try ADC Theatre, phone number 01223300085 and postcode cb58as",
        "Let me know if you need anything else!\n\n---",
        "Use ```python to open a Python block in Markdown.",
        "In Python, x = '```' is just a string of three backticks.",
        "Nested fences:\n\n````md\n```\ninner\n```\n````",
        "| Plan | Price |\n|---|---|\n| Basic | $5 |",
        "Steps:\n1. Open the app.\n2. Tap Settings.",
        "One plus two is:\n\n3.",
        "Stay as long as you like, we are open until ten",
        "A regex like [0-9]{3} matches three digits, and $\\sqrt[3]{8}$ is 2.",
        "Hey [there](https://example.com), welcome back!",
        "Dividing zero by zero gives NaN, and None is Python's null.",
    ],
)
def test_plausible_replies_pass(reply: str) -> None:
    assert check_turn(turn("Tell me something about it please.", reply)) == {}


_EMAIL = "Dear [Landlord's Name],\n\nThe heater in my flat has been broken since Monday.\n\nBest regards,\n[Your Name]"


def test_bracketed_fields_of_a_draft_the_user_asked_for_are_content() -> None:
    asked = "Can you write an email to my landlord about the broken heater?"
    assert "placeholder" not in check_turn(turn(asked, _EMAIL))
    assert "placeholder" not in check_turn(turn("Any tips?", "Here's a template:\n\nHi [Name], thanks!"))
    assert "placeholder" in check_turn(turn("Where is my order please?", _EMAIL))
    assert "placeholder" in check_turn(turn(asked, "Hi {{landlord_name}}, the heater is broken."))


_EN = "Can you tell me what you think about the sea today?"


@pytest.mark.parametrize(
    ("user", "reply", "without_the_ask"),
    [
        ("Translate this into German please: I would like a coffee and a piece of cake.",
         "Ich möchte einen Kaffee und ein Stück Kuchen, bitte.", _EN),
        ("Answer in Spanish: what is the capital of Australia?",
         "La capital de Australia es Canberra, no Sídney como mucha gente piensa.", _EN),
        ("Write me a short poem in French about the sea.",
         "La mer danse sous le ciel gris, elle chante pour les marins et pour les enfants.", _EN),
        ("Responde en inglés por favor: ¿cuál es la capital de Australia?",
         "The capital of Australia is Canberra, not Sydney as many people think.",
         "Hola, ¿cuál es la capital de Australia? No lo sé y la necesito para mañana."),
        ("How do I say 'thank you for your help, see you tomorrow' in Russian?",
         "Спасибо за помощь, до завтра!", _EN),
    ],
)  # fmt: skip
def test_a_reply_in_the_language_the_user_asks_for(user: str, reply: str, without_the_ask: str) -> None:
    assert "language" not in check_turn(turn(user, reply))
    assert "language" in check_turn(turn(without_the_ask, reply))


def test_every_placeholder_alternative_names_one_of_its_gate_pieces() -> None:
    """`check_turn` searches for placeholders only in replies that hold a gate piece."""
    alts = alternatives(hygiene.PLACEHOLDER.pattern)
    alts = [a for alt in alts for a in (alternatives(alt[9:-1]) if alt.startswith("(?P<field>") else [alt])]
    assert len(alts) > 20
    pieces = hygiene._MAYBE_PLACEHOLDER
    assert [a for a in alts if not any(p in a for p in pieces)] == []


def test_language_mismatch_by_script_and_by_latin_language() -> None:
    assert "language" in check_turn(
        turn("Здравствуйте, подскажите что-нибудь по-русски.", "Sorry, I only speak English here, my friend.")
    )
    assert "language" in check_turn(
        turn(
            "Hola, quiero cambiar la fecha de mi vuelo para el viernes por favor",
            "Sure, I can change the date of your flight to Friday for you.",
        )
    )
    assert "language" not in check_turn(turn("hola", "Hello! How are you today, my friend?"))


@pytest.mark.parametrize(
    ("user", "language"),
    [
        # short messages in everyday words: function words, greetings and asks of chat
        ("Hola, necesito ayuda con mi pedido por favor, no ha llegado todavía.", "es"),
        ("Bonjour, je voudrais annuler ma commande, elle est arrivée en retard.", "fr"),
        ("Olá, meu pedido ainda não chegou, você pode me ajudar?", "pt"),
        ("Ciao, il mio ordine non è ancora arrivato, mi puoi aiutare?", "it"),
        ("Hallo, ich möchte meine Bestellung stornieren, sie ist zu spät gekommen.", "de"),
        ("¿Me puedes ayudar con mi pedido? No ha llegado todavía.", "es"),
    ],
)
@pytest.mark.parametrize(
    "reply",
    ["Hello! I'd be happy to help you with your order. Could you give me the order number?",
     "Sure, can you give me your order number?"],
)  # fmt: skip
def test_a_reply_in_english_to_a_short_message_in_another_language(user: str, language: str, reply: str) -> None:
    assert check_turn(turn(user, reply))["language"] == f"user writes {language}, reply is en"


@pytest.mark.parametrize(
    "text",
    [
        "I'm looking for a cheap hotel in the centre of town with free parking please.",
        "im good, how r u? do you like la la land? ya, me too, ha",
        "Check https://na.leagueoflegends.com/en-us/ and tell me what you think of it.",
        "Can we get a table at the Italian place on the corner, please?",
    ],
)
def test_english_chat_is_not_read_as_another_language(text: str) -> None:
    assert latin_language(text) in ("en", None)


def test_script_and_language_guesses() -> None:
    assert script_of("Привет, как дела у тебя сегодня?") == "CYRILLIC"
    assert script_of("こんにちは、今日はいい天気ですね。") == "CJK"
    assert script_of("short") is None
    assert latin_language("Je voudrais changer la date de mon vol pour vendredi") == "fr"
    assert latin_language("ok") is None


def test_truncation_reason() -> None:
    assert truncated("Fine.", "length") == "finish_reason=length"
    assert truncated("A complete sentence.", "stop") is None


def test_every_turn_gets_a_result_and_the_thread_is_the_share_of_clean_turns() -> None:
    per_turn, thread = evaluate(
        turn("first question here", "A clean answer to the first question.", index=0),
        turn("second question here", "", index=1),
        turn("third question here", "Another clean answer.", index=2),
        turn("fourth question, no answer yet", None, index=3),
    )
    assert sorted(per_turn) == [0, 1, 2, 3]
    assert per_turn[3].status == Status.NOT_APPLICABLE
    assert per_turn[1].label == "empty"
    assert thread.score == pytest.approx(2 / 3, abs=1e-4)
    assert thread.evidence["turns_checked"] == 3


def test_tool_call_only_turn_is_empty_unless_it_hands_off() -> None:
    dangling = Turn(
        index=0,
        messages=[
            Message(role="user", content="book it"),
            Message(role="assistant", tool_calls=[ToolCall(name="book")]),
        ],
    )
    assert "empty" in check_turn(dangling)
    handoff = thread_from_messages(
        "t",
        [
            {"role": "user", "content": "get me a human"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": "1", "function": {"name": "transfer_to_human_agents", "arguments": "{}"}}],
            },
            {"role": "tool", "tool_call_id": "1", "content": "Transfer successful"},
        ],
    )
    assert check_turn(handoff.turns[0]) == {}


def test_thread_without_replies() -> None:
    results = ResponseHygiene().evaluate(Thread(key="t", turns=[turn("hello?", None)]))
    assert [r.status for r in results] == [Status.NOT_APPLICABLE, Status.NOT_APPLICABLE]
    assert results[0].turn_index == 0
    assert ResponseHygiene().evaluate(Thread(key="empty"))[-1].status == Status.NOT_APPLICABLE
