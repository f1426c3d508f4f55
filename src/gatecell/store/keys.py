"""The cache key: which logged exchange can answer a new request.

Two requests share a key when they go to the same endpoint of the same gateway, for the same
model, with the same body once normalised:

- the body as JSON with sorted keys, so key order does not matter, and bytes, text and dicts
  of the same JSON give the same key;
- ``stream`` and ``stream_options`` dropped, and ``:streamGenerateContent`` read as
  ``:generateContent``: **a streamed and a non-streamed request for the same thing share a
  key**, so either can answer the other (a streamed request replays the text as a stream);
- the gateway's root address without user, password, query, trailing slash or ``/v1``.

The key is a sha256 hex digest of that JSON: the same in every process and every run (no
``hash()``, whose salt changes per process).
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

_MAPPING = (dict, Mapping)  # dict first: what JSON gives, and an instant check

__all__ = ["cache_key", "normalised_body", "gateway_address"]

_DROPPED = frozenset(("stream", "stream_options"))
_ENCODE = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str).encode


def normalised_body(body: Mapping[str, Any] | bytes | str | None) -> Any:
    """The body as the key sees it: parsed, less the fields that only choose streaming."""
    if isinstance(body, (bytes, bytearray, memoryview)):
        body = bytes(body).decode()
    if isinstance(body, str):
        body = json.loads(body) if body.strip() else None
    if isinstance(body, _MAPPING):
        return {k: v for k, v in body.items() if k not in _DROPPED}
    return body


@functools.lru_cache(maxsize=256)  # a process talks to a few gateways, once per exchange each
def gateway_address(url: str | None) -> str:
    """``https://user:pw@h:1/v1/?key=x`` → ``https://h:1``: what identifies a gateway, and
    nothing that could be a credential."""
    if not url:
        return ""
    parts = urlsplit(url.strip())
    host = parts.hostname or ""
    if ":" in host:  # IPv6
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = f"{host}:{port}" if port else host
    path = parts.path.rstrip("/")
    if path.endswith("/v1"):
        path = path[:-3]
    return urlunsplit((parts.scheme, netloc, path, "", ""))


def _endpoint(endpoint: str) -> str:
    return endpoint.split("?", 1)[0].replace(":streamGenerateContent", ":generateContent")


def cache_key(
    endpoint: str, model: str | None, body: Mapping[str, Any] | bytes | str | None, gateway: str | None
) -> str:
    """The sha256 hex key of a request (see the module docstring for what is normalised)."""
    payload = [_endpoint(endpoint), model or "", gateway_address(gateway), normalised_body(body)]
    text = _ENCODE(payload)
    return hashlib.sha256(text.encode()).hexdigest()
