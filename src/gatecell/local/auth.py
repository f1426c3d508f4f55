"""Who may call: SPEC 5 credentials checked in constant time against every configured key.

Bearer works everywhere; the native key headers are accepted where their SDKs send them
(``x-goog-api-key`` on generate-content, ``x-api-key`` on messages). The comparison walks all
keys with `hmac.compare_digest` and never stops early, so timing says nothing about which key
or how much of it matched.
"""

from __future__ import annotations

import hmac

from gatecell.wire.secret import Secret

from .errors import is_generate_content

__all__ = ["Keys", "credential"]

# Paths that answer without a key: capability URLs of generated media, and the health probe.
OPEN_PREFIXES = ("/files/", "/health")


class Keys:
    def __init__(self, keys: tuple[Secret, ...]) -> None:
        self._keys = tuple(k.reveal().encode() for k in keys)

    def accept(self, presented: bytes | None) -> bool:
        if not presented:
            return False
        ok = False
        for key in self._keys:
            ok |= hmac.compare_digest(presented, key)
        return ok


def credential(path: str, headers: dict[bytes, bytes]) -> bytes | None:
    """The key the request presents, from the header its endpoint allows."""
    if is_generate_content(path):
        native = headers.get(b"x-goog-api-key")
        if native:
            return native.strip()
    elif path.startswith(("/v1/messages", "/messages")):
        native = headers.get(b"x-api-key")
        if native:
            return native.strip()
    auth = headers.get(b"authorization")
    if auth and auth[:7].lower() == b"bearer ":
        return auth[7:].strip()
    return None
