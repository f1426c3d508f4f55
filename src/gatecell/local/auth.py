"""Who may call: SPEC 5 credentials checked in constant time against every configured key.

Bearer works everywhere; the native key headers are accepted where their SDKs send them
(``x-goog-api-key`` on generate-content, ``x-api-key`` on messages). The comparison walks all
keys with `hmac.compare_digest` and never stops early, so timing says nothing about which key
or how much of it matched.

A request with a valid key acts as that key's *owner*: jobs and generated files belong to
it. The owner is a digest of the key, never the key, so whatever stores it (the job and
media stores today, a file on disk later) holds nothing a caller could present.
"""

from __future__ import annotations

import hashlib
import hmac

from gatecell.wire.util.secret import Secret

from .errors import is_generate_content

__all__ = ["Keys", "credential", "owner_of"]


def owner_of(key: bytes) -> str:
    """The stable owner id of a key: a domain-separated SHA-256, hex, of the key's bytes."""
    return hashlib.sha256(b"gatecell-local-owner\x00" + key).hexdigest()[:32]


class Keys:
    def __init__(self, keys: tuple[Secret, ...]) -> None:
        self._keys = tuple((k.reveal().encode(), owner_of(k.reveal().encode())) for k in keys)

    def owner(self, presented: bytes | None) -> str | None:
        """The owner id of the presented key, or None when it is no configured key."""
        if not presented:
            return None
        found = None
        for key, owner in self._keys:
            if hmac.compare_digest(presented, key):
                found = owner
        return found


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
