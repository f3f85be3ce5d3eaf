"""D1 `repetition`: the §9 cases of metrics.md plus edge cases."""

from typing import Any

import pytest

from tracing_eval.metrics.deterministic import repetition
from tracing_eval.metrics.deterministic.repetition import WEIGHTS, Context, Pair, Repetition, analyse, verdict
from tracing_eval.metrics.deterministic.views import Located, replies
from tracing_eval.model import Message, Status, Thread
from tracing_eval.transcripts import thread_from_messages

TRIED = "Have you tried clearing the cache and restarting the app?"
CLEAR = "Please clear the cache and restart the app."
PARAPHRASE = "Maybe clear the app cache, then restart it."
REINSTALL = "Then let's reinstall it: open Settings, choose Apps, uninstall it, and download it again from the store."
USERS = [
    "My app keeps crashing on startup.",
    "I did that already, it still crashes.",
    "Still crashing. What else can I do?",
]


def chat(*texts: str, system: str | None = None) -> Thread:
    """Alternate user/assistant messages, starting with the user."""
    msgs: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    msgs += [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(texts)]
    return thread_from_messages("t", msgs)


def support(*replies: str) -> Thread:
    texts: list[str] = []
    for user, reply in zip(USERS, replies, strict=False):
        texts += [user, reply]
    return chat(*texts)


def run(thread: Thread, threshold: float | None = None):
    [result] = Repetition(threshold).evaluate(thread)
    return result


def pairs(result) -> list[tuple[int, int, float]]:
    return [(p["first_turn"], p["repeat_turn"], p["similarity"]) for p in result.evidence["pairs"]]


def test_weights_follow_the_seed() -> None:
    assert WEIGHTS == {"none": 1.0, "minor": 0.9, "partial": 0.7, "mostly": 0.3, "fully": 0.0}


def test_loop_is_fully() -> None:
    result = run(support(TRIED, CLEAR, TRIED))
    assert (result.label, result.score, result.passed) == ("fully", 0.0, False)
    assert pairs(result) == [(0, 1, 0.8), (0, 2, 1.0)]
    assert result.evidence["repeated_messages"] == [3, 5]
    assert result.evidence["max_similarity"] == 1.0


def test_recovered_loop_is_partial() -> None:
    result = run(support(TRIED, CLEAR, REINSTALL))
    assert (result.label, result.score, result.passed) == ("partial", 0.7, True)
    assert pairs(result) == [(0, 1, 0.8)]
    assert result.evidence["repeated_messages"] == [3]


def test_clean_thread_is_none() -> None:
    result = run(
        support(
            TRIED,
            "Which version of the app do you have? You can see it under Settings, About.",
            REINSTALL,
        )
    )
    assert (result.label, result.score, result.passed) == ("none", 1.0, True)
    assert result.evidence["repeated_messages"] == []
    assert result.evidence["max_similarity"] < 0.5


def test_consistent_answer_to_a_repeated_question_is_neutral() -> None:
    answer = "Go to Settings, choose Security and click Reset password."
    result = run(chat("How do I reset my password?", answer, "How do I reset my password?", answer))
    assert (result.label, result.score) == ("none", 1.0)
    assert result.evidence["repeated_messages"] == []
    assert len(result.evidence["neutral_pairs"]) == 1


def test_last_reply_repeating_is_mostly() -> None:
    result = run(support(TRIED, REINSTALL, TRIED))
    assert (result.label, result.score) == ("mostly", 0.3)
    assert result.evidence["repeated_messages"] == [5]


def test_paraphrase_is_minor() -> None:
    result = run(support(TRIED, PARAPHRASE, REINSTALL))
    assert (result.label, result.score, result.passed) == ("minor", 0.9, True)
    [pair] = result.evidence["pairs"]
    assert pair["kind"] == "rehash"
    assert pair["similarity"] == pytest.approx(0.5455)


def test_echoing_the_users_topic_is_not_a_rehash() -> None:
    thread = chat(
        "I love stardew valley, it's my favourite farming game.",
        "My favorite game is stardew valley too. Farming games are relaxing.",
        "What do you like about it?",
        "Stardew valley is a game I can pick back up at any time.",
    )
    assert run(thread).label == "none"


def test_positions_count_system_and_tool_call_only_messages() -> None:
    thread = thread_from_messages(
        "t",
        [
            {"role": "system", "content": "You are a support bot."},
            {"role": "user", "content": USERS[0]},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": "c1", "function": {"name": "lookup", "arguments": "{}"}}],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "{}"},
            {"role": "assistant", "content": TRIED},
            {"role": "user", "content": USERS[1]},
            {"role": "assistant", "content": CLEAR},
            {"role": "user", "content": USERS[2]},
            {"role": "assistant", "content": TRIED},
        ],
    )
    result = run(thread)
    assert result.label == "fully"
    assert result.evidence["repeated_messages"] == [6, 8]
    assert result.evidence["replies_compared"] == 3


FILLERS = [
    "Open the network panel and toggle the airplane switch twice.",
    "Check whether the display brightness slider moves at all.",
    "Play a test sound from the speaker settings page.",
    "Clear the browser history from the privacy dashboard.",
    "Calibrate the battery by draining it fully overnight.",
    "Free some disk space by deleting old downloads.",
    "Remap the caps lock key in the keyboard preferences.",
]


def far_apart(first: str, last: str) -> Thread:
    texts: list[str] = []
    for k, reply in enumerate([first, *FILLERS, last]):
        texts += [f"Question number {k} about something else entirely {k}", reply]
    return chat(*texts)


def test_a_word_for_word_repeat_before_the_window_is_found() -> None:
    result = run(far_apart(TRIED, TRIED))  # reply 8 says again what reply 0 said, 7 replies in between
    assert result.label == "partial"
    assert pairs(result) == [(0, 8, 1.0)]
    assert result.evidence["max_sentence_similarity"] == 1.0  # the judge's gate sees it


def test_a_chinese_sentence_said_again_far_back_is_found() -> None:
    shipped = "您的订单已经发货，预计三天内送达。"
    fillers = ["今天天气很好适合出去散步。", "我们的商店营业时间是早上九点到晚上十点。", "这款手机的电池续航时间很长。",
               "您的会员积分可以用来兑换礼品。", "运费根据您所在的地区计算。", "新款衣服下周一开始上架销售。",
               "退货需要在收到商品后七天内申请。"]  # fmt: skip
    texts = ["你好", shipped]
    for k, filler in enumerate(fillers):
        texts += [f"问题{k}", filler]
    result = run(chat(*texts, "怎么样了", shipped))
    assert pairs(result) == [(0, 8, 1.0)]


def test_a_rewording_before_the_window_is_not_compared() -> None:
    thread = far_apart(TRIED, CLEAR)  # 0.8 similar: a repeat inside the window of 6 replies
    assert run(thread).label == "none"
    [wide] = analyse(replies(thread), Context.of(thread), window=10).repeats
    assert (wide.first.turn, wide.repeat.turn, wide.similarity) == (0, 8, 0.8)


def test_a_courtesy_formula_said_again_far_apart_is_no_repeat() -> None:
    closing = "Thanks for chatting, have a good night!"
    assert run(far_apart(closing, f"Restart the router from its back panel. {closing}")).evidence["pairs"] == []


def test_a_short_reply_said_again_word_for_word_is_a_repeat() -> None:
    # one content word: too short to compare by its words, but said again it is the same reply
    result = run(far_apart("Do you have a Pikachu?", "Do you have a Pikachu?"))
    assert pairs(result) == [(0, 8, 1.0)]
    assert result.evidence["replies_compared"] == 9
    assert result.label == "partial"


def test_a_short_reply_loop_at_the_end_is_fully() -> None:
    result = run(chat("Hi", "Nice, me too, thanks.", "I like chess.", "Nice, me too, thanks.", "Chess is fun.",
                      "Nice me too thanks"))  # fmt: skip
    assert (result.label, result.evidence["repeated_messages"]) == ("fully", [3, 5])


@pytest.mark.parametrize(
    ("first", "again"),
    [
        ("Do you have a Pikachu?", "Do you have a pet?"),  # another content word
        ("Ok, great.", "Ok, great."),  # under four words
        ("What else can I do for you?", "What else can I do for you?"),  # a courtesy formula
    ],
)
def test_short_replies_that_differ_are_too_short_or_courteous_are_no_repeat(first: str, again: str) -> None:
    assert run(far_apart(first, again)).evidence["repeated_messages"] == []


def test_a_sentence_run_into_the_next_one_is_still_found() -> None:
    result = run(chat("I like the Avengers films.", "Which one is your favorite movie?", "There are so many.",
                      "Which one is your favorite movie?With all the characters in it, it is the best one."))  # fmt: skip
    assert result.evidence["repeated_messages"] == [3]


def lookups(*order_ids: str, asks: tuple[str, ...] = ("Where is my order {}?", "And where is {}?")) -> Thread:
    """A user asks after each order in turn; the assistant says the same words before each lookup."""
    msgs: list[dict[str, Any]] = []
    for k, (order, ask) in enumerate(zip(order_ids, asks, strict=False)):
        call = {
            "id": str(k),
            "type": "function",
            "function": {"name": "get_order", "arguments": f'{{"id": "{order}"}}'},
        }
        msgs += [
            {"role": "user", "content": ask.format(order)},
            {"role": "assistant", "content": "Let me check that order for you right away.", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": str(k), "content": '{"status": "processing"}'},
            {"role": "assistant", "content": f"Order {order} is still being processed; it ships within two days."},
        ]
    return thread_from_messages("t", msgs)


def test_the_same_words_before_another_lookup_are_a_new_action() -> None:
    result = run(lookups("W1234567", "W7654321"))
    assert result.evidence["repeated_messages"] == []
    assert [p["kind"] for p in result.evidence["neutral_pairs"]] == ["new_details", "new_details"]


def test_the_same_words_before_the_same_lookup_are_a_repeat() -> None:
    result = run(lookups("W1234567", "W1234567", asks=("Where is my order {}?", "Can you cancel it instead?")))
    assert result.evidence["repeated_messages"] == [5, 7]


def test_an_apology_said_as_a_sentence_of_its_own_is_a_courtesy_but_not_inside_a_denial() -> None:
    denial = "the travel insurance is non-refundable once the trip has been booked and paid"
    result = run(chat("My flight was cancelled.", f"I apologize for the inconvenience. {REINSTALL}",
                      "And the hotel?", f"I apologize for the inconvenience. {CLEAR}",
                      "Can I get the insurance back?", f"I'm sorry, but {denial}.",
                      "Please, it was not my fault.", f"I understand your frustration, but {denial}."))  # fmt: skip
    assert result.evidence["repeated_messages"] == [7]


def test_short_replies_alone_that_do_not_repeat_are_not_applicable() -> None:
    # too little to call the thread free of repetition: the judge's gate must still ask
    result = run(chat("Hi", "Do you like music?", "Yes", "Do you have any pets?", "No", "I DON'T KNOW"))
    assert result.status == Status.NOT_APPLICABLE


def test_a_short_answer_to_the_same_question_asked_again_is_neutral() -> None:
    result = run(
        chat("Tell me about the film.", "A thriller about two brothers who run a diner in a small town.",
             "Who directed it?", "Kathryn Bigelow directed it, her third feature after two shorts.",
             "Where was it filmed?", "It was in Pennsylvania.", "Where was it filmed?", "It was in Pennsylvania.")
    )  # fmt: skip
    assert result.evidence["repeated_messages"] == []
    assert [p["kind"] for p in result.evidence["neutral_pairs"]] == ["same_question"]


def nonsense(k: int) -> str:
    """Four made-up words that no other `k` shares (letters only: numbers would all read as `#`)."""
    return " ".join("".join(chr(97 + int(d)) for d in f"{4 * k + w:05d}") for w in range(4)) + "."


def ticket_thread(fillers: int, upgrade_asked: int | None) -> Thread:
    texts = ["Book me a ticket for order 111.", "Your ticket for order 111 is booked and confirmed."]
    for k in range(fillers):
        user = "Please add a window seat upgrade." if k == upgrade_asked else nonsense(10_000 + k)
        texts += [user, nonsense(k)]
    last = "Your ticket for order 111 is booked and confirmed. The window seat upgrade is added."
    return chat(*texts, "Thanks.", last)


@pytest.mark.parametrize(
    ("fillers", "asked_at", "new_answer"),
    [(7, 3, True), (30, 26, True), (30, 2, False)],  # the upgrade asked for 4, 4 and 28 turns before
)
def test_a_far_repeat_with_details_the_user_just_gave_is_a_new_answer(
    fillers: int, asked_at: int, new_answer: bool
) -> None:
    result = run(ticket_thread(fillers, asked_at))
    assert [p["kind"] for p in result.evidence["neutral_pairs"]] == (["new_details"] if new_answer else [])
    assert [p["kind"] for p in result.evidence["pairs"]] == ([] if new_answer else ["sentence"])
    [loop] = run(ticket_thread(fillers, None)).evidence["pairs"]
    assert (loop["first_turn"], loop["repeat_turn"], loop["kind"]) == (0, fillers + 1, "sentence")


def test_a_template_with_another_number_far_apart_is_no_repeat() -> None:
    """Inside the window a reference number that changes is still a loop; far apart, the same
    confirmation with another number confirms something else."""
    result = run(far_apart("Your booking reference is 48213.", "Your booking reference is 55107."))
    assert result.label == "none"


def test_far_repeats_read_only_the_turns_before_them(monkeypatch) -> None:
    """The second half of a long thread says the first half again: every repeat is far back, and
    only the last few turns before each are read for what the user brought up."""
    texts = []
    for k in range(600):  # each repeat adds words of its own, so what came up before it is read
        texts += [nonsense(10_000 + k), nonsense(k) if k < 300 else f"{nonsense(k - 300)} {nonsense(20_000 + k)}"]
    thread = chat(*texts)
    reads = 0
    inputs = Context.inputs

    def counted(self: Context, turn: int) -> frozenset[str]:
        nonlocal reads
        reads += 1
        return inputs(self, turn)

    monkeypatch.setattr(Context, "inputs", counted)
    result = run(thread)
    assert len(result.evidence["pairs"]) == 300
    assert repetition.SINCE_TURNS == 12
    assert reads <= 12 * 300  # 3,600; every turn since the earlier reply would be 90,000


def test_repeated_segments_list_sentences_shared_by_replies() -> None:
    closing = "Let me know if the app still crashes after that."
    result = run(
        support(
            f"{TRIED} {closing}", f"{REINSTALL} {closing}", "Which phone model and Android version do you use exactly?"
        )
    )
    [segment] = result.evidence["repeated_segments"]
    assert segment["text"] == closing
    assert segment["count"] == 2
    assert segment["positions"] == [1, 3]


def test_threshold_override() -> None:
    assert run(support(TRIED, CLEAR, REINSTALL), threshold=0.95).passed is False
    assert Repetition().spec.threshold == 0.7
    assert Repetition(0.5).spec.threshold == 0.5


@pytest.mark.parametrize(
    "thread",
    [
        Thread(key="empty"),
        chat("hello?"),
        chat("hi", "ok", "hi", "ok"),
        thread_from_messages(
            "tools",
            [
                {"role": "user", "content": "do it"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"id": "1", "function": {"name": "f", "arguments": "{}"}}],
                },
            ],
        ),
    ],
)
def test_nothing_to_compare_is_not_applicable(thread: Thread) -> None:
    result = run(thread)
    assert result.status == Status.NOT_APPLICABLE
    assert result.score is None
    assert result.reason


def test_single_long_reply_is_not_applicable() -> None:
    assert run(chat(USERS[0], TRIED)).status == Status.NOT_APPLICABLE


def test_same_template_about_a_different_reservation_is_not_a_repeat() -> None:
    template = "The reservation {} is in basic economy, which cannot be modified to change flights or cabin class."
    thread = chat(
        "Can you upgrade my reservation NM1VX1?",
        template.format("NM1VX1"),
        "What about KC18K6?",
        template.format("KC18K6"),
        "And the last one, H8Q05L?",
        template.format("H8Q05L"),
    )
    result = run(thread)
    assert result.label == "none"
    assert [p["kind"] for p in result.evidence["neutral_pairs"]] == ["new_details", "new_details"]
    same = chat("Upgrade NM1VX1?", template.format("NM1VX1"), "Please try again", template.format("NM1VX1"))
    assert run(same).label == "mostly"


# --- cases found by hand (issue 11) -------------------------------------------------------------


def test_a_question_asked_three_times_and_answered_verbatim_three_times_is_a_repeat() -> None:
    question = "How do I export my data?"
    answer = "Open Settings, choose Privacy, then click Export data and wait for the email with the archive."
    result = run(chat(question, answer, question, answer, question, answer))
    assert result.label == "mostly"  # the second answer is a fair re-answer; the third is the bot going round
    assert result.evidence["repeated_messages"] == [5]
    assert [p["kind"] for p in result.evidence["neutral_pairs"]] == ["same_question"]
    assert result.evidence["pairs"][0]["earlier_positions"] == [3]


def test_a_verbatim_loop_whose_reference_number_changes_is_a_loop() -> None:
    reply = "I'm sorry for the trouble. I have logged ticket {} and a technician will call you within 24 hours."
    result = run(
        chat(
            "My internet has been down since Monday.",
            reply.format("48213"),
            "It's been two days and nobody called.",
            reply.format("48391"),
            "This is ridiculous, I work from home.",
            reply.format("48555"),
        )
    )
    assert (result.label, result.score) == ("fully", 0.0)
    assert result.evidence["repeated_messages"] == [3, 5]
    assert {p["kind"] for p in result.evidence["pairs"]} == {"near_verbatim"}


def test_one_repeating_sentence_of_a_longer_reply_is_found() -> None:
    stall = "Our billing team will review the charge and contact you by email within three working days."
    result = run(
        chat(
            "I was charged twice for my order.",
            f"I'm sorry about the double charge. {stall}",
            "Can you tell me why it happened?",
            f"Duplicate charges usually come from a payment retried after a timeout. {stall}",
            "Fine, thanks.",
            "You're welcome, have a good day and enjoy your purchase.",
        )
    )
    assert result.label == "minor"
    [pair] = result.evidence["pairs"]
    assert (pair["first_position"], pair["repeat_position"], pair["kind"]) == (1, 3, "sentence")
    assert result.evidence["repeated_messages"] == [3]


def test_a_footer_said_in_every_reply_counts_once_towards_the_share() -> None:
    """A disclaimer that several earlier replies said is one repeated sentence of the reply, not the
    whole of it: each reply says something new, so the thread moved on (minor, not mostly)."""
    footer = "Please note: I am an AI assistant and cannot give medical advice; consult a doctor for a diagnosis."
    result = run(
        chat(
            "I have a headache since yesterday.",
            f"Headaches often come from dehydration or lack of sleep. Try drinking water and resting. {footer}",
            "What about ibuprofen?",
            f"Ibuprofen can relieve tension headaches; follow the dose on the package. {footer}",
            "Can I take it with coffee?",
            f"Caffeine can actually boost the effect of some pain relievers, in moderation. {footer}",
        )
    )
    assert (result.label, result.passed) == ("minor", True)
    last = result.evidence["pairs"][-1]
    assert (last["repeat_position"], last["earlier_positions"], last["kind"]) == (5, [1, 3], "sentence")
    assert last["share"] < 0.8


def test_a_reply_made_of_sentences_said_before_is_still_near_verbatim() -> None:
    """The look-alike: the reply's sentences each came back, from different earlier replies."""
    a = "Please restart the router and wait until all of its lights turn green."
    b = "Then open the network settings on your laptop and forget the old connection."
    result = run(chat("No internet.", a, "Done, the lights are green.", b, "What now?", f"{a} {b}"))
    last = result.evidence["pairs"][-1]
    assert (last["repeat_position"], last["kind"], last["share"]) == (5, "near_verbatim", 1.0)


def test_a_chinese_verbatim_loop_is_found() -> None:
    reply = "很抱歉，我无法处理您的退款请求。请联系人工客服。"
    result = run(chat("我要退款。", reply, "为什么不行？", reply, "请帮帮我！", reply))
    assert result.status == Status.OK
    assert (result.label, result.score) == ("fully", 0.0)
    assert result.evidence["repeated_messages"] == [3, 5]
    assert result.evidence["language_covered"] is False  # no stop-words or stemming for Chinese


def test_japanese_sentences_without_spaces_are_compared() -> None:
    result = run(
        chat(
            "注文はどこですか？",
            "ご注文は現在配送センターで処理中です。もう少々お待ちください。",
            "まだ届きません。",
            "申し訳ございません。ご注文は現在配送センターで処理中です。",
        )
    )
    assert result.label == "minor"  # one sentence comes back; the apology is new
    [pair] = result.evidence["pairs"]
    assert (pair["first_position"], pair["repeat_position"], pair["kind"]) == (1, 3, "sentence")


@pytest.mark.parametrize(
    ("earlier", "later"),
    [
        ("Barcha is a great restaurant in San Francisco.", "Boulibar is a great restaurant in San Francisco."),
        (
            "Your refund for the blue winter jacket will reach your card within five business days.",
            "Your refund for the red winter coat will reach your card within five business days.",
        ),
    ],
)
def test_a_sentence_exactly_four_fifths_alike_matches_at_any_length(earlier: str, later: str) -> None:
    """4 of 5 and 8 of 10 tokens alike are both a ratio of 0.8, which matches: rapidfuzz's cutoff
    once let exactly 0.8 through for some lengths and not for others."""
    news = "It also has a lovely garden terrace with heaters for the colder evenings of the year."
    result = run(chat("Any ideas?", earlier, "Another one?", f"{later} {news}"))
    [pair] = result.evidence["pairs"]
    assert (pair["repeat_position"], pair["kind"], pair["similarity"]) == (3, "sentence", 0.8)


def test_a_short_answer_to_the_question_it_asked_is_no_repeat() -> None:
    """The bot asked about the user; saying the same of itself answers the question sent back."""
    result = run(
        chat("hi", "i'm good! do you like to watch television?", "yes, do you?", "i do like to watch television.")
    )
    assert result.evidence["pairs"] == []


def test_a_short_question_asked_again_is_a_repeat() -> None:
    """The look-alike: the same question again, a greeting before it or not."""
    result = run(
        chat(
            "hi",
            "me too, do you know how cinematography was invented?",
            "no",
            "do you know how cinematography was invented?",
        )
    )
    [pair] = result.evidence["pairs"]
    assert (pair["first_position"], pair["repeat_position"]) == (1, 3)


@pytest.mark.parametrize(
    "ask", ["Could you double-check?", "Can you check it again?", "Could you just confirm it to me?"]
)
def test_the_same_answer_after_a_request_to_check_again_is_requested(ask: str) -> None:
    answer = "As a silver member with an economy reservation, you can take a total of 4 free checked bags."
    result = run(chat("How many bags can I take?", answer, ask, answer))
    assert result.evidence["pairs"] == []
    assert [p["kind"] for p in result.evidence["neutral_pairs"]] == ["requested"]


def test_one_confirmation_template_for_two_different_requests_is_not_a_repeat() -> None:
    result = run(
        chat(
            "Please book a table for 2 at Luigi's at 7pm.",
            "Done! I've booked a table for 2 at Luigi's at 7pm. Your confirmation number is 5512.",
            "Great, now book Sakura for 4 at 8pm tomorrow.",
            "Done! I've booked a table for 4 at Sakura at 8pm. Your confirmation number is 5513.",
        )
    )
    assert (result.label, result.evidence["repeated_messages"]) == ("none", [])
    [pair] = result.evidence["neutral_pairs"]
    assert pair["kind"] == "new_details"


def test_a_restatement_the_user_asked_for_is_not_a_repeat() -> None:
    steps = "First unplug the router, wait thirty seconds, plug it back in and wait for the green light."
    result = run(
        chat(
            "How do I reset my router?",
            steps,
            "Sorry, I missed that. Can you repeat the steps?",
            steps,
        )
    )
    assert (result.label, result.evidence["repeated_messages"]) == ("none", [])
    assert [p["kind"] for p in result.evidence["neutral_pairs"]] == ["requested"]


def test_user_turns_that_repeat_are_listed() -> None:
    result = run(chat("Where is my parcel?", TRIED, "Where is my parcel?", REINSTALL, "Hello??", CLEAR))
    assert result.evidence["user_repeats"] == [1]


def test_a_long_thread_is_compared_within_a_window() -> None:
    texts: list[str] = []
    for k in range(200):
        texts += [f"Tell me fact number {k}.", f"Fact {k}: the {k}th item in the catalogue weighs {k} grams."]
    result = run(chat(*texts))
    assert (result.status, result.label) == (Status.OK, "none")
    assert result.evidence["replies_compared"] == 200
    # the same template each time, about the fact the user asked for: 199 neutral pairs, no repeat
    assert len(result.evidence["neutral_pairs"]) == 199


@pytest.mark.parametrize(
    "closing",
    [
        "If there's anything else you need, feel free to let me know!",
        "Is there something else I can help you with today?",
        "Do you need any other help with your booking?",
        "Do you need more help with your booking?",
    ],
)
def test_courtesy_formulas_are_not_repeats(closing: str) -> None:
    result = run(
        chat(
            "Cancel my booking ZFA04Y.",
            f"Your booking ZFA04Y is cancelled and the refund goes to your card. {closing}",
            "And can I get a receipt?",
            f"I've emailed the receipt for the cancellation to your address on file. {closing}",
            "Thanks!",
            "You're welcome! If you have any other questions, feel free to let me know. Have a great day!",
            "Thanks again!",
            "You're welcome! If you have any other questions, feel free to let me know. Have a great day!",
        )
    )
    assert (result.label, result.evidence["repeated_messages"]) == ("none", [])


DISTINCT = [
    "Which version of the app do you have? You can see it under Settings, About.",
    "Your phone needs at least two gigabytes of free storage for the update.",
    "The crash log shows a problem with the camera permission.",
    "Grant the camera permission under Privacy and open the app again.",
    "Battery saver can stop background sync, so switch it off for now.",
    "Our servers had an outage this morning; it was fixed an hour ago.",
    "Sign out, then sign in with your email address and password.",
    "Widgets on the home screen refresh every fifteen minutes.",
    "Dark mode lives under Display, next to the font size slider.",
    "Notifications can be muted per channel in the app's own menu.",
]
ASKS = [
    "My app keeps crashing.", "Anything else?", "What version do I need?", "How much space?", "Why the camera?",
    "Where is that setting?", "What about sync?", "Was something down?", "How do I log in again?",
    "Do widgets update?", "Is there a dark theme?", "Can I mute alerts?", "Still no luck here.",
]  # fmt: skip


def test_two_repeats_far_apart_in_a_long_thread_are_partial_not_mostly() -> None:
    """Frequent repeats with almost no progress (`mostly`) are judged near the end: a long thread
    that repeated itself once early on and once at the end has moved on in between."""
    answers = [TRIED, CLEAR, *DISTINCT, DISTINCT[8]]
    result = run(chat(*(text for pair in zip(ASKS, answers, strict=True) for text in pair)))
    assert result.evidence["repeated_messages"] == [3, 2 * len(answers) - 1]
    assert (result.label, result.passed) == ("partial", True)


@pytest.mark.parametrize(
    ("kinds", "label"),
    [
        # reply index -> kind of its repeat, in a thread of 14 replies
        ({1: "near_verbatim", 13: "near_verbatim"}, "partial"),  # far apart: progress in between
        ({10: "near_verbatim", 13: "near_verbatim"}, "mostly"),  # two near-verbatim lately
        ({9: "rehash", 11: "sentence", 13: "near_verbatim"}, "mostly"),  # half of the last six repeat
        ({11: "rehash", 13: "near_verbatim"}, "partial"),
        ({12: "near_verbatim", 13: "near_verbatim"}, "fully"),
        ({13: "rehash"}, "minor"),
    ],
)
def test_mostly_is_frequent_repeats_near_the_end(kinds: dict[int, str], label: str) -> None:
    items = [Located(k, 2 * k + 1, Message(role="assistant", content=f"reply {k}")) for k in range(14)]
    repeats = [Pair(items[k - 1], items[k], 1.0, 1.0, kind) for k, kind in kinds.items()]
    assert verdict(repeats, items) == label


def test_the_word_gates_never_hide_a_courtesy_formula_or_a_restatement_request() -> None:
    """`courtesy` tests its words first (`_FORMULA_WORDS`) and `Context` its user messages
    (`_RESTATE_NEEDS`): every sentence of the labelled sets that the pattern matches passes its gate."""
    import json

    from tests.conftest import DATASETS
    from tracing_eval.text import could_match, sentence_words

    messages = [
        m
        for name in ("tau_airline_gpt4o.jsonl", "uss_sgd_mwoz.jsonl", "dstc9_interactive.jsonl")
        for line in (DATASETS / name).read_text().splitlines()
        for m in json.loads(line)["turns"]
        if m["role"] in ("user", "assistant") and m.get("content")
    ]
    formulas = requests = 0
    for m in messages:
        if m["role"] == "assistant":
            for words in sentence_words(m["content"]):
                if repetition._FORMULA.search(" ".join(words)):
                    formulas += 1
                    assert repetition.courtesy(words), words
        elif repetition._RESTATE.search(m["content"]):
            requests += 1
            assert could_match(m["content"], repetition._RESTATE_NEEDS), m["content"]
    assert formulas > 1000 and requests > 50
    for text in ("What did you just say?", "Come again?", "Could you double-check that?", "Noch mal bitte"):
        assert repetition._RESTATE.search(text) and could_match(text, repetition._RESTATE_NEEDS)
    assert repetition.courtesy("sorry for the inconvenience".split())
    assert not repetition.courtesy("your flight leaves at noon".split())
