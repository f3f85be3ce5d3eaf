"""Calibration of the word-level similarity used by D1 and D5 (metrics.md §9)."""

from difflib import SequenceMatcher

import pytest

from tracing_eval.metrics.deterministic.similarity import Profile, sentences, similarity, stem, text_similarity, tokens

TRIED = "Have you tried clearing the cache and restarting the app?"
CLEAR = "Please clear the cache and restart the app."
PARAPHRASE = "Maybe clear the app cache, then restart it."


def test_cache_and_restart_scores_point_eight() -> None:
    assert text_similarity(TRIED, CLEAR) == pytest.approx(0.8)


def test_identical_replies_score_one() -> None:
    assert text_similarity(TRIED, TRIED) == 1.0


def test_paraphrase_falls_in_the_minor_band() -> None:
    assert text_similarity(TRIED, PARAPHRASE) == pytest.approx(0.545, abs=0.001)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("order shipped", "refund processed"),
        ("Your order has shipped and will arrive on Friday.", "The refund was processed to your card today."),
        ("I love hiking in the mountains on weekends.", "Python is a programming language with dynamic typing."),
        ("Your reservation ZFA04Y is confirmed for May 20.", "Please tell me which airport you are flying from."),
    ],
)
def test_unrelated_replies_score_low(a: str, b: str) -> None:
    assert 0.0 <= text_similarity(a, b) <= 0.25


def test_word_level_ignores_shared_letters() -> None:
    # characters would find common letters ("r", "e", "d", "ss") in unrelated replies; words do not
    assert SequenceMatcher(None, "order shipped", "refund processed").ratio() > 0.3
    assert text_similarity("order shipped", "refund processed") == 0.0


def test_tokens_drop_stop_words_and_stem() -> None:
    assert tokens(TRIED) == ["try", "clear", "cache", "restart", "app"]
    assert stem("caches") == "cache"
    assert stem("tried") == "try"
    assert stem("glass") == "glass"


def test_normalisation_folds_case_punctuation_and_unicode() -> None:
    assert text_similarity("CLEAR the cache, RESTART the app!!!", "clear the cache; restart the app") == 1.0
    assert tokens("Ｃａｃｈｅ") == ["cache"]  # NFKC folds full-width letters


def test_empty_texts_are_not_similar() -> None:
    assert text_similarity("", "") == 0.0
    assert similarity(Profile.of("the and of"), Profile.of("the and of")) == 0.0


def test_containment_catches_a_reply_inside_a_longer_one() -> None:
    short = "Restart the router and wait two minutes."
    long = "Sorry about that. Restart the router and wait two minutes. Then check the lights again."
    assert text_similarity(short, long) == 1.0


def test_sentences_split_on_punctuation_and_lines() -> None:
    assert sentences("One. Two? Three!\nFour") == ["One.", "Two?", "Three!", "Four"]
