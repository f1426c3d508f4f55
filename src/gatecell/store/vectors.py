"""The kept vectors (tables ``embeddings`` and ``embedding_blocks``): written by the store's
writer (`keep`), read by `kept`, emptied by `clear`."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from .records import VectorsEntry, iso

__all__ = ["keep", "kept", "clear"]

# Hashes a query at most: each query costs about as much as a few hundred hashes, so as many
# as the connection takes (SQLite >= 3.32: 32,766 variables), within a bound, else the 999 of
# the oldest SQLite (Python 3.10 cannot ask). 5,000 reads 50,000 hashes 3x faster than 500.
_CHUNK = 5000
_OLDEST_LIMIT = 999


def keep(conn: sqlite3.Connection, entry: VectorsEntry) -> None:
    """One answer's vectors as a block, and where each text's is (inside the writer's
    transaction). A text kept before points to the new block from now on."""
    block = conn.execute(
        "INSERT INTO embedding_blocks (width, vectors, created) VALUES (?, ?, ?)",
        (entry.width, entry.vectors, iso(entry.at)),
    ).lastrowid
    head = (entry.gateway, entry.model, entry.dimensions)
    conn.executemany(
        "INSERT OR REPLACE INTO embeddings VALUES (?, ?, ?, ?, ?, ?)",
        [(*head, digest, block, position) for position, digest in enumerate(entry.hashes)],
    )


def kept(
    conn: sqlite3.Connection, gateway: str, model: str, dimensions: int, hashes: Sequence[bytes]
) -> dict[bytes, bytes]:
    """The vectors the tables hold for these hashes (float32 bytes), by hash."""
    where: dict[int, list[tuple[bytes, int]]] = {}
    variables = getattr(sqlite3, "SQLITE_LIMIT_VARIABLE_NUMBER", None)  # Python >= 3.11
    limit = conn.getlimit(variables) if variables is not None else _OLDEST_LIMIT  # type: ignore[attr-defined,unused-ignore]
    step = max(1, min(_CHUNK, limit - 3))  # three variables name the model
    for start in range(0, len(hashes), step):
        chunk = list(hashes[start : start + step])
        rows = conn.execute(
            "SELECT text_sha256, block, position FROM embeddings WHERE gateway = ? AND model = ? "
            f"AND dimensions = ? AND text_sha256 IN ({', '.join('?' * len(chunk))})",
            [gateway, model, dimensions, *chunk],
        )
        for digest, block, position in rows:
            where.setdefault(block, []).append((bytes(digest), position))
    found: dict[bytes, bytes] = {}
    for block, texts in where.items():
        row = conn.execute("SELECT width, vectors FROM embedding_blocks WHERE id = ?", (block,)).fetchone()
        if row is None:
            continue
        size = row[0] * 4
        vectors = memoryview(row[1])
        found.update((digest, bytes(vectors[p * size : (p + 1) * size])) for digest, p in texts)
    return found


def clear(conn: sqlite3.Connection) -> int:
    """Forget every kept vector; how many texts had one."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        count = conn.execute("DELETE FROM embeddings").rowcount
        conn.execute("DELETE FROM embedding_blocks")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return count
