"""Which API a request path belongs to: one table for the client, the cache and the log.

The names are those of the log's ``api`` column and of ``--api``: chat, messages,
generate-content, responses (the text APIs, which the cache can answer), then image,
speech, video, imagine, music, models, embeddings and rerank.
"""

from __future__ import annotations

__all__ = ["api_of", "TEXT_APIS"]

_APIS = (
    ("/chat/completions", "chat"),
    ("enerateContent", "generate-content"),  # generateContent and streamGenerateContent
    ("/messages", "messages"),
    ("/responses", "responses"),
    ("/images/", "image"),
    ("/audio/speech", "speech"),
    ("/videos", "video"),
    ("/imgjob/", "imagine"),
    ("/musicjob/", "music"),
    ("/models", "models"),
    ("/embeddings", "embeddings"),
    ("/rerank", "rerank"),
)

TEXT_APIS = ("chat", "messages", "generate-content", "responses")
"""The text APIs (each one `dialects.Dialect`), as ``--api`` and ``%config Gatecell.api`` spell
them: the conversations, and the APIs whose answers the cache replays (the same for the same
request). Media and jobs always go to the gateway (a new image is what asking again means)."""


def api_of(path: str) -> str | None:
    """The API of a request path (``/v1/chat/completions`` → ``chat``), or None."""
    for fragment, api in _APIS:
        if fragment in path:
            return api
    return None
