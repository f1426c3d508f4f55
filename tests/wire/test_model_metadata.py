"""What gateways say about their models, read as the endpoints of SPEC 4 (no server needed)."""

from __future__ import annotations

from gatecell.wire.apis.routing import Router
from gatecell.wire.transport.results import ModelList


def listing() -> ModelList:
    return ModelList.from_body(
        {
            "data": [
                {"id": "gpt-x", "supported_endpoint_types": ["openai", "anthropic", "gemini"]},  # new-api
                {"id": "thinker", "supported_endpoint_types": ["openai-response"]},
                {"id": "painter", "supported_endpoint_types": ["image-generation"]},
                {"id": "lite-reasoner", "mode": "responses"},  # LiteLLM
                {"id": "lite-tts", "mode": "audio_speech"},
                {"id": "lite-rerank", "mode": "rerank"},  # a name gatecell has no path for stays as it is
                {"id": "plain"},  # says nothing
            ]
        }
    )


def test_endpoint_types_and_modes_become_spec_paths():
    assert {m.id: m.endpoints for m in listing()} == {
        "gpt-x": ["/v1/chat/completions", "/v1/messages", "/v1beta/models/gpt-x:generateContent"],
        "thinker": ["/v1/responses"],
        "painter": ["/v1/images/generations"],
        "lite-reasoner": ["/v1/responses"],
        "lite-tts": ["/v1/audio/speech"],
        "lite-rerank": ["rerank"],
        "plain": None,
    }


def test_the_router_learns_responses_only_models_from_them():
    router = Router(patterns=())
    router.learn(listing())
    assert [router.wants_responses(m) for m in ("gpt-x", "thinker", "lite-reasoner", "plain")] == [
        False,
        True,
        True,
        False,
    ]


def test_suggest_names_models_that_fit_the_path_first():
    models = listing()
    assert models.suggest("gpt-x") is None  # listed
    assert ModelList.from_body({"data": []}).suggest("gpt-x") is None  # nothing to suggest
    assert (
        models.suggest("nope", "/v1/audio/speech")
        == "the gateway does not serve 'nope'; it serves lite-tts, plain"
    )
    said = ModelList([m for m in models if m.endpoints], raw=None)  # without "plain", which fits all
    assert said.suggest("nope", "/v1/nothing-serves-this", limit=3) == (
        "the gateway does not serve 'nope'; it serves gpt-x, thinker, painter and 3 more"
    )
