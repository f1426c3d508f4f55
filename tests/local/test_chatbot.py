"""The stand-in chat and reasoning models, as pure functions."""

from __future__ import annotations

import pytest

from gatecell.local.backends.chatbot import answer, tokenize
from gatecell.local.backends.reasoning import think


@pytest.mark.parametrize(
    ("question", "reply"),
    [
        ("what is 2+2?", "2+2 = 4"),
        ("What is 12 times 7?", "12 * 7 = 84"),
        ("compute (1 + 2) * 3.5", "(1 + 2) * 3.5 = 10.5"),
        ("what is 2 to the power of 10", "2 ** 10 = 1024"),
        ("1/0", "1/0 has no value: division by zero is undefined."),
        ("count to 3", "1, 2, 3."),
        ("Reply with exactly: pong", "pong"),
        ('say "hi there"', "hi there"),
    ],
)
def test_simple_questions_get_exact_answers(question, reply):
    assert answer([("user", question)]).text == reply


@pytest.mark.parametrize(
    ("question", "label"),
    [
        (
            "Classify the sentiment of this review as positive, negative or neutral: I love it, great",
            "positive",
        ),
        ("Classify the sentiment as Positive or Negative: awful, it arrived broken", "Negative"),
        ("classify this review as positive, negative or neutral: it arrived on Tuesday", "neutral"),
        ("Classify the topic as billing, shipping or other: where is my shipping box?", "shipping"),
        ("Classify the topic as billing, shipping or other: hello", "other"),
    ],
)
def test_classification_prompts_get_one_of_their_labels(question, label):
    assert answer([("user", question)]).text == label


def test_huge_powers_are_not_computed():
    assert "=" not in answer([("user", "what is 9**99999999")]).text


def test_it_remembers_a_name_within_the_conversation():
    turns = [("user", "My name is Ada Lovelace"), ("assistant", "ok"), ("user", "What is my name?")]
    assert answer(turns).text == "Your name is Ada Lovelace."
    assert answer([("user", "What is my name?")]).text.startswith("You have not told me")


def test_other_prompts_are_described_honestly():
    text = answer([("system", "You are a tour guide."), ("user", "Describe the canals of Amsterdam")]).text
    assert "stand-in" in text and "canals" in text and "Amsterdam" in text and "tour guide" in text


def test_system_styles():
    assert answer([("system", "You are a pirate."), ("user", "say ahoy")]).text == "Arr! ahoy"
    assert answer([("system", "Be brief."), ("user", "hello")]).text.count(".") <= 1


def test_tokens_rejoin_to_the_text_and_max_tokens_cuts():
    full = answer([("user", "Tell me about rivers")])
    assert "".join(tokenize(full.text)) == full.text
    cut = answer([("user", "Tell me about rivers")], max_tokens=2)
    assert cut.finish_reason == "length" and cut.completion_tokens == 2 and full.text.startswith(cut.text)


def test_reasoning_effort_scales_reasoning_tokens():
    low, high = think([("user", "2*21")], "low"), think([("user", "2*21")], "high")
    assert low.answer.text == high.answer.text == "2*21 = 42"
    assert 0 < low.reasoning_tokens < high.reasoning_tokens
    assert think([("user", "2*21")], "none").summary == ""


def test_write_python_gets_a_stub_in_one_fenced_block_that_compiles():
    from gatecell.notebook.markdown import code_blocks

    text = answer([("user", 'Please write python to parse "a`b" dates, fast')]).text
    assert text == answer([("user", 'Please write python to parse "a`b" dates, fast')]).text  # deterministic
    [(lang, code)] = code_blocks(text)
    assert lang == "python" and code.startswith("def parse_a_b_dates():")
    compile(code, "<stub>", "exec")
    assert "```" not in code  # the task's own backtick cannot close the fence
    assert answer([("user", "rewrite python code for me")]).text.startswith(
        ("You asked", "Your", "I received")
    )


COMPLAINT = "Broke after two days. Total waste of money."


@pytest.mark.parametrize(
    ("text", "label"),
    [
        (COMPLAINT, "negative"),  # complaint words, no "bad" in sight
        ("It stopped working and I returned it.", "negative"),
        ("Not bad at all.", "positive"),  # a negation turns a word round
        ("It is not good.", "negative"),
        ("Works well, no problems so far.", "positive"),
        ("It never works.", "negative"),
        ("I would never buy it again.", "negative"),  # a "never" that turns nothing
        ("It arrived on Tuesday.", "neutral"),
    ],
)
def test_sentiment_reads_negations_and_complaints(text, label):
    question = f"Classify the sentiment of this review as positive, negative or neutral: {text}"
    assert answer([("user", question)]).text == label


@pytest.mark.parametrize(
    ("question", "reply"),
    [
        (r"Repeat exactly: the area is $$\int_0^1 x^2\,dx$$", r"the area is $$\int_0^1 x^2\,dx$$"),
        ("Say: 2 + 2 = 5", "2 + 2 = 5"),
        ('Quote "6 * 7 is 42" back to me', '"6 * 7 is 42" back to me'),
        ('quote: "what is 3*3?"', "what is 3*3?"),
    ],
)
def test_an_instruction_to_repeat_or_quote_wins_over_arithmetic(question, reply):
    assert answer([("user", question)]).text == reply
