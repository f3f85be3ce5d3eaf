"""Text built to make regular expressions or fuzzy matching backtrack: read in linear time, and right.

Each hostile text below held a worker for minutes or more before it was fixed (`bench/hostile_text.py`,
figures in docs/benchmarks.md, "Hostile text"): a long run of "a." before a stray "@" (emails, 4 s at
32k characters), "!?!?..." never followed by a space (sentence ends), "a-a-a-..." (codes with a digit,
user ids), "order number - - ... - 1!" (the words between a slot's name and its value: 0.9 s at 18
dashes, doubling with each one more), "user" and a run of spaces, "{%{%..." (placeholders), "aAaA..."
before "://" (credentials in logged URLs), "say say ..." (a reply asking again), and replies of
thousands of sentences (`repetition`). Here they run at sizes the old code would have taken minutes
to hours on; the tests check what is found next to the hostile run, so a fix that reads less is
caught too. Speed itself is measured in the bench, not here."""

from __future__ import annotations

from tracing_eval.logging import redact_url_credentials
from tracing_eval.metrics.deterministic import slots
from tracing_eval.metrics.deterministic.reask import Reask
from tracing_eval.metrics.deterministic.repetition import MAX_COMPARED, Repetition
from tracing_eval.metrics.deterministic.response_hygiene import check_turn
from tracing_eval.metrics.deterministic.user_friction import asks_again
from tracing_eval.model import MetricResult
from tracing_eval.scenarios import persona_line
from tracing_eval.text import sentence_words
from tracing_eval.transcripts import thread_from_messages

N = 200_000


def _values(text: str) -> list[tuple[str, str]]:
    return list(slots.values_in(text))


def test_emails_are_found_from_the_first_word_character_of_their_run() -> None:
    assert ("email", "john.doe+x@mail.example.com") in _values("Write to john.doe+x@mail.example.com please")
    assert ("email", "john@x.com") in _values("Write to ..john@x.com now")
    assert ("email", "a.b@x.co") in _values("-+a.b@x.co")
    assert not any(slot == "email" for slot, _ in _values("no mail@here and @ alone"))


def test_a_long_run_before_a_stray_at_sign_is_no_email_and_the_real_one_is_found() -> None:
    text = "a." * N + "@ and my email is mia@shop.example.org"
    assert [v for slot, v in _values(text) if slot == "email"] == ["mia@shop.example.org"]


def test_sentence_ends_in_a_long_run_of_marks_never_followed_by_a_space() -> None:
    # a run ends a sentence before a space or, when it holds only ? and !, between two letters
    # ("movie?with": chatbots run sentences together); a dot between letters never does
    assert sentence_words("Really?!? Yes... ok!!!x www.example.com?id") == [
        ["really"],
        ["yes"],
        ["ok"],
        ["x", "www", "example", "com"],
        ["id"],
    ]
    assert sentence_words("Vraiment ?! Oui… 好的。¿Qué?Sí") == [["vraiment"], ["oui"], ["好的"], ["qué"], ["sí"]]
    assert sentence_words("one two" + "!?" * N + "x. three four.") == [["one", "two"], ["x"], ["three", "four"]]
    assert sentence_words("one two" + "!?." * N + "x. three four.") == [["one", "two", "x"], ["three", "four"]]
    assert sentence_words("é" + "?!" * N + "x. fin.") == [["é"], ["x"], ["fin"]]
    assert sentence_words("é" + "?!." * N + "x. fin.") == [["é", "x"], ["fin"]]


def test_codes_and_user_ids_next_to_a_long_run_of_hyphenated_words() -> None:
    run = "a-" * N
    assert slots.bare_value("order_number", "It's #W4471-22.") == "W4471-22"
    assert slots.bare_value("user_id", "mia_li_3668") == "mia_li_3668"
    assert slots.bare_value("user_id", "-.mia.li9.") == "mia.li9"
    assert slots.offered_values("order_number", f"Which order number: {run} or W12345?")
    assert not slots.offered_values("order_number", f"What is your order number? {run}")
    assert slots.offered_values("user_id", f"Is your user id {run} or mia_li_3668?")
    assert not slots.offered_values("user_id", f"What is your user id? {run}")


def test_the_words_between_a_slot_name_and_its_value_cannot_be_split_every_way() -> None:
    assert ("order_number", "W4471") in _values("my order number is # W4471")
    assert ("order_number", "88412") in _values("Mi número de pedido es 88412")
    hostile = ("order number" + " -" * 40 + " 1! ") * 50 + "order number is W4471"
    assert [v for slot, v in _values(hostile) if slot == "order_number"] == ["W4471"]
    assert "user_id" in slots.named_slots("What is your user - id?")
    assert "user_id" not in slots.named_slots("Ask the user" + " " * N + "!")
    found = {v for slot, v in _values("user" + " " * N + "1! my user id is mia_li_3668") if slot == "user_id"}
    assert found == {"mia_li_3668"}


def test_reask_reads_a_thread_of_hostile_messages() -> None:
    hostile = "a." * N + "@ " + "order number" + " -" * 40 + " 1! " + "a-" * N
    thread = thread_from_messages(
        "t",
        [
            {"role": "user", "content": f"{hostile} my email is mia@shop.example.org"},
            {"role": "assistant", "content": "Could you provide your email address?"},
        ],
    )
    result = Reask().evaluate(thread)[-1]
    assert result.label == "reask"
    assert result.evidence["reasks"][0]["value"] == "mia@shop.example.org"


def _reply(text: str) -> dict[str, str]:
    """The failing hygiene checks of a turn whose reply is `text`."""
    messages = [{"role": "user", "content": "Hello there, how are you?"}, {"role": "assistant", "content": text}]
    return check_turn(thread_from_messages("t", messages).turns[0])


def test_placeholders_next_to_a_long_run_of_template_openers() -> None:
    assert _reply("Hello {{ user.name }}, welcome") == {"placeholder": "leaked template text '{{ user.name }}'"}
    assert _reply("{%" * N + " {% if x %} done.")["placeholder"].startswith("leaked template text '{%")
    assert _reply("{%" * N + " and {{ x")["placeholder"] == "leaked template text '{{'"
    assert _reply("Fine. " + "%" * N + "{ fine } done.") == {}


def test_url_credentials_are_redacted_after_a_long_run_of_scheme_characters() -> None:
    assert redact_url_credentials("see 1https://bob:pw@db.local/x") == "see 1https://[redacted]@db.local/x"
    assert redact_url_credentials("postgres://u:p@h/db") == "postgres://[redacted]@h/db"
    hostile = "aA" * N + "x@ then redis://admin:secret@cache:6379"
    assert redact_url_credentials(hostile).endswith("redis://[redacted]@cache:6379")


def test_the_persona_of_a_thread_that_opens_with_a_long_run_of_hyphenated_words() -> None:
    def line(first: str) -> str:
        return persona_line(thread_from_messages("t", [{"role": "user", "content": first}]))

    assert "does not volunteer identifiers" in line("a-" * N)
    assert "gives order numbers or other identifiers up front" in line("a-" * N + " order W-4471")


def _word(i: int) -> str:
    """A distinct letters-only word for each i (digits would read as one number token)."""
    out = ""
    while True:
        i, r = divmod(i, 100)  # one consonant-vowel syllable per base-100 digit
        out += "bcdfghjklmnpqrstvwxz"[r // 5] + "aeiou"[r % 5]
        if not i:
            return out + "x"


def _sentences(start: int, count: int) -> str:
    return " ".join(
        f"The {_word(4 * k)} {_word(4 * k + 1)} {_word(4 * k + 2)} ships." for k in range(start, start + count)
    )


def _repetition(*replies: str) -> MetricResult:
    messages: list[dict[str, str]] = []
    for k, reply in enumerate(replies):
        messages += [
            {"role": "user", "content": f"Tell me about part {_word(k)} please."},
            {"role": "assistant", "content": reply},
        ]
    return Repetition().evaluate(thread_from_messages("t", messages))[0]


def test_repetition_finds_a_huge_reply_given_again() -> None:
    huge = _sentences(0, 20_000)  # about 700k characters
    result = _repetition(huge, huge)
    assert result.evidence["repeated_messages"] == [3]
    assert result.label in ("partial", "mostly", "fully")


def test_repetition_compares_a_reply_by_its_first_sentences_only() -> None:
    """The bound that keeps a huge reply linear: sentences past the first MAX_COMPARED of a reply are
    not compared (docs/metrics.md, `repetition`)."""
    first = _sentences(0, 300)
    within = _sentences(1_000, MAX_COMPARED - 10) + " " + _sentences(0, 20)
    beyond = _sentences(2_000, MAX_COMPARED + 10) + " " + _sentences(0, 20)
    assert _repetition(first, within).evidence["repeated_messages"] == [3]
    assert _repetition(first, beyond).evidence["repeated_messages"] == []


def test_user_messages_of_a_huge_thread_are_compared_too() -> None:
    huge = _sentences(0, 20_000)
    messages = [
        {"role": "user", "content": huge},
        {"role": "assistant", "content": "Your parts list is saved under folder seven."},
        {"role": "user", "content": huge},
        {"role": "assistant", "content": "Shipping labels were printed for every carton."},
    ]
    result = Repetition().evaluate(thread_from_messages("t", messages))[0]
    assert result.evidence["user_repeats"] == [1]


def test_a_reply_asking_again_is_read_clause_by_clause() -> None:
    assert asks_again("Could you say that again?")
    assert asks_again("Thanks. Please tell me your order number?")
    assert not asks_again("I will say it. Fine?")
    assert asks_again("say " * N + "it?")
    assert not asks_again("say " * N + "!")
