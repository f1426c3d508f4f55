"""`Store.answer_keys`: the keys `lookup` can answer, read at once for a batch."""

from __future__ import annotations


def test_only_keys_that_can_answer(store):
    store.record_exchange("/v1/chat/completions", "m", b"{}", text="ok", status=200, cache_key="good")
    store.record_exchange(
        "/v1/chat/completions", "m", b"{}", error="500 from POST", status=500, cache_key="failed"
    )
    store.record_exchange("/v1/chat/completions", "m", b"{}", text="half", partial=True, cache_key="partial")
    store.record_exchange("/v1/chat/completions", "m", b"{}", text="ok", cached=True, cache_key="hit")
    store.record_exchange("/v1/chat/completions", "m", b"{}", text="ok again", status=200, cache_key="good")
    keys = store.answer_keys()  # waits for this process's own writes first, as lookup does
    assert keys == {"good"}
    assert {k for k in ("good", "failed", "partial", "hit") if store.lookup(k)} == keys


def test_too_many_keys_say_so(store):
    for i in range(3):
        store.record_exchange("/v1/chat/completions", "m", b"{}", text="ok", status=200, cache_key=f"k{i}")
    assert store.answer_keys(limit=3) == {"k0", "k1", "k2"}
    assert store.answer_keys(limit=2) is None


def test_an_empty_or_missing_log_has_none(store):
    assert store.answer_keys() == set()
