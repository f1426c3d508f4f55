"""A conversation (system prompt + turns) with sampling options, as a call on each text API.

The one converter from "what was said" to the request of chat completions, native
messages, native generate-content or responses: `Gateway.converse` (and through it the
magics) and the chat → responses fallback of `Gateway.chat` use it, so the formats cannot
drift apart. It is sans-IO: it returns the endpoint method's name and its arguments.
"""

from __future__ import annotations

from typing import Any

from .errors import InvalidRequest, echo

__all__ = ["TEXT_APIS", "split", "for_api", "to_responses"]

# Names of the text APIs, as the magics' --api and %config Gatecell.api spell them.
TEXT_APIS = ("chat", "messages", "generate-content", "responses")


def split(messages: list[dict[str, Any]]) -> tuple[str | None, list[dict[str, Any]]]:
    """The system messages joined into one prompt (or None), and the other turns."""
    system = [m["content"] for m in messages if m["role"] == "system"]
    turns = [{"role": m["role"], "content": m["content"]} for m in messages if m["role"] != "system"]
    return ("\n\n".join(system) if system else None), turns


def _responses_fields(messages: list[dict[str, Any]], max_tokens: int | None) -> dict[str, Any]:
    """System prompt as ``instructions``; a lone user turn as the ``input`` string (SPEC 2.5),
    a longer exchange as a list of turns."""
    system, turns = split(messages)
    fields: dict[str, Any] = {
        "input": turns[0]["content"] if len(turns) == 1 and turns[0]["role"] == "user" else turns
    }
    if system is not None:
        fields["instructions"] = system
    if max_tokens is not None:
        fields["max_output_tokens"] = max_tokens
    return fields


def for_api(
    api: str,
    model: str,
    messages: list[dict[str, Any]],
    *,
    temperature: float | None = None,
    top_p: float | None = None,
    max_tokens: int | None = None,
    effort: str | None = None,
) -> tuple[str, dict[str, Any]]:
    """``(method, arguments)``: the `Gateway` method that carries the conversation on ``api``,
    and the keyword arguments to call it with (all but ``stream``)."""
    sampling = {k: v for k, v in (("temperature", temperature), ("top_p", top_p)) if v is not None}
    if api == "chat":
        chat: dict[str, Any] = {"model": model, "messages": messages, "max_tokens": max_tokens, **sampling}
        if effort is not None:
            chat["reasoning_effort"] = effort
        return "chat", chat
    if api == "responses":
        return "responses", {
            "model": model,
            "effort": effort,
            **_responses_fields(messages, max_tokens),
            **sampling,
        }
    system, turns = split(messages)
    if api == "messages":
        native: dict[str, Any] = {
            "model": model,
            "messages": turns,
            "max_tokens": max_tokens or 1024,
            **sampling,
        }
        if system is not None:
            native["system"] = system
        return "messages", native
    if api == "generate-content":
        contents = [
            {"role": "model" if t["role"] == "assistant" else "user", "parts": [{"text": t["content"]}]}
            for t in turns
        ]
        gc: dict[str, Any] = {"model": model, "contents": contents}
        config = {"temperature": temperature, "topP": top_p, "maxOutputTokens": max_tokens}
        if any(v is not None for v in config.values()):
            gc["generationConfig"] = {k: v for k, v in config.items() if v is not None}
        if system is not None:
            gc["systemInstruction"] = {"parts": [{"text": system}]}
        return "generate_content", gc
    raise InvalidRequest("api", f"must be one of {', '.join(TEXT_APIS)}; got {echo(api)}")


def to_responses(chat: dict[str, Any]) -> dict[str, Any]:
    """A chat request body as a responses body, for a reasoning model (SPEC 4 note 3):
    fields the two share pass as they are; ``response_format`` becomes ``text.format``;
    ``stream_options`` has no counterpart."""
    body = {
        k: v
        for k, v in chat.items()
        if k not in ("messages", "max_tokens", "reasoning_effort", "stream_options", "response_format")
    }
    body.update(_responses_fields(chat["messages"], chat.get("max_tokens")))
    if chat.get("reasoning_effort"):
        body["reasoning"] = {"effort": chat["reasoning_effort"]}
    wanted = chat.get("response_format")
    if isinstance(wanted, dict) and wanted.get("type") in ("json_schema", "json_object"):
        spec = wanted.get("json_schema") if wanted["type"] == "json_schema" else None
        body["text"] = {"format": {"type": wanted["type"], **(spec if isinstance(spec, dict) else {})}}
    return body
