"""The ``embeddings`` table's reads (its writes go through the store's writer)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

__all__ = ["kept", "clear"]

_CHUNK = 500  # hashes a query at most (within the 999 variables of the oldest SQLite)


def kept(
    conn: sqlite3.Connection, gateway: str, model: str, dimensions: int, hashes: Sequence[bytes]
) -> dict[bytes, bytes]:
    """The vectors the table holds for these hashes, by hash."""
    found: dict[bytes, bytes] = {}
    for start in range(0, len(hashes), _CHUNK):
        chunk = list(hashes[start : start + _CHUNK])
        rows = conn.execute(
            "SELECT text_sha256, vector FROM embeddings WHERE gateway = ? AND model = ? AND dimensions = ? "
            f"AND text_sha256 IN ({', '.join('?' * len(chunk))})",
            [gateway, model, dimensions, *chunk],
        )
        found.update((bytes(h), bytes(v)) for h, v in rows)
    return found


def clear(conn: sqlite3.Connection) -> int:
    """Delete every kept vector; how many there were."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        count = conn.execute("DELETE FROM embeddings").rowcount
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return count
