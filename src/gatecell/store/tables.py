"""The tables of ``gatecell.db``, and the migrations that bring any older file forward.

The file is plain SQLite, for ``sqlite3``, Datasette or sqlite-utils as much as for gatecell.
Times are UTC, ISO 8601 text (``2026-01-02T03:04:05.123456Z``): they sort as text and
SQLite's date functions read them. JSON columns end in ``_json``. Nothing here ever holds an
API key: every text passes through `gatecell.wire.util.secret.redact` before it is written.

``exchanges``: one row per request answered (or failed), from every entry point.

| Column | Type | What |
|---|---|---|
| id | INTEGER PRIMARY KEY | order of insertion |
| time | TEXT | when the exchange happened (UTC ISO 8601) |
| endpoint | TEXT | the path, e.g. ``/v1/chat/completions`` |
| model | TEXT | the model asked for |
| api | TEXT | chat, messages, generate-content, responses, image, speech, video, imagine, music, models |
| gateway | TEXT | the gateway's root address (no user, password or query); ``local`` for the local gateway |
| params_json | TEXT | the request body less model, prompt and messages: temperature, top_p, max_tokens, ... |
| prompt | TEXT | the prompt: the last user message, ``input`` or ``prompt`` (less a typed instruction) |
| messages_json | TEXT | the messages (or contents, or input list) as sent |
| response | TEXT | the reply text (a streamed reply once complete, or as far as it came) |
| reasoning | TEXT | the reasoning summary, when the reply had one |
| prompt_tokens | INTEGER | usage: input tokens |
| completion_tokens | INTEGER | usage: output tokens, reasoning tokens included (Gemini's thoughts added) |
| reasoning_tokens | INTEGER | usage: of which reasoning |
| total_tokens | INTEGER | usage: total |
| usage_json | TEXT | the usage object as the gateway sent it |
| latency | REAL | seconds from sending to the whole reply |
| status | INTEGER | HTTP status |
| error | TEXT | the error line, NULL when the exchange succeeded |
| request_id | TEXT | the gateway's request id |
| conversation | TEXT | the conversation's name (``%%chat -c NAME``) |
| notebook | TEXT | the notebook's path, when the kernel knows it |
| cached | INTEGER | 1 when answered from this log, no request sent |
| partial | INTEGER | 1 when the reply was interrupted: ``response`` holds what arrived |
| cache_key | TEXT | sha256 of endpoint, model, gateway and normalised body (see `keys`) |
| media_type | TEXT | media replies: MIME type |
| media_size | INTEGER | media replies: size in bytes |
| media_sha256 | TEXT | media replies: sha256 of the bytes |
| media | BLOB | media replies: the bytes, only when ``GATECELL_LOG_MEDIA=1`` |
| response_json | TEXT | the raw reply body, to answer again from the cache (media bodies only with media) |
| schema_name | TEXT | a typed answer's schema: its name (a model class's, ``choice`` for labels...) |
| schema_json | TEXT | and its JSON Schema |
| parsed_json | TEXT | the value read from the answer, as JSON; NULL when it did not validate |
| cost | REAL | what the exchange cost, in US dollars, when known (``cost_source`` says who said) |
| cost_source | TEXT | ``gateway`` (its answer), ``model-info`` (its model info), ``prices`` (the user's) |

``jobs``: one row per job-style task (imagine, video, music), updated as it goes.

| Column | Type | What |
|---|---|---|
| id | INTEGER PRIMARY KEY | order of first sight |
| gateway | TEXT | the gateway's root address ('' when unknown) |
| kind | TEXT | imagine, video or music |
| job_id | TEXT | the gateway's task id; (gateway, kind, job_id) is unique |
| model | TEXT | the model, when the kind has one |
| prompt | TEXT | the prompt |
| state | TEXT | queued, running, succeeded or failed |
| progress | REAL | 0 to 100 |
| error | TEXT | why it failed |
| notebook | TEXT | the notebook that submitted it |
| created | TEXT | first recorded (UTC ISO 8601) |
| updated | TEXT | last recorded (UTC ISO 8601) |
| body_json | TEXT | the gateway's last body about the job |

``model_prices``: the prices a gateway's model info gave (LiteLLM's ``GET /model/info``), asked
once per gateway and kept with the date they were asked, for the exchanges whose answer did
not say what they cost.

| Column | Type | What |
|---|---|---|
| gateway | TEXT | the gateway's root address |
| model | TEXT | the model name the gateway serves (``''``: the row saying when the gateway was asked) |
| input_cost_per_token | REAL | US dollars per input token |
| output_cost_per_token | REAL | US dollars per output token |
| fetched | TEXT | when it was asked (UTC ISO 8601) |

``embeddings`` and ``embedding_blocks``: the vectors embedding requests brought back
(``Gateway.embed``), so that a text is sent once, ever; ``gatecell cache clear --embeddings``
empties both. A block holds the vectors of one answer; ``embeddings`` says where each text's is.

| Column | Type | What |
|---|---|---|
| gateway | TEXT | the gateway's root address; ``local`` for the local gateway |
| model | TEXT | the model asked for |
| dimensions | INTEGER | the ``dimensions`` asked for; 0 when none (the model's own) |
| text_sha256 | BLOB | sha256 of the text (UTF-8); (gateway, model, dimensions, text_sha256) is the key |
| block | INTEGER | the ``embedding_blocks`` row holding its vector |
| position | INTEGER | which vector of the block |

| ``embedding_blocks`` column | Type | What |
|---|---|---|
| id | INTEGER PRIMARY KEY | the block |
| width | INTEGER | numbers a vector |
| vectors | BLOB | the vectors, one after the other: little-endian float32, as the gateway gave them |
| created | TEXT | when they were kept (UTC ISO 8601) |

``tool_calls``: one row per call of a tool chain (``gw.chat(..., tools=[...])``), each beside
the exchange whose answer asked for it.

| Column | Type | What |
|---|---|---|
| id | INTEGER PRIMARY KEY | order of insertion |
| time | TEXT | when the call ended (UTC ISO 8601) |
| exchange_id | INTEGER | the ``exchanges`` row of the answer that asked for it (NULL: not logged) |
| chain | TEXT | the chain's id (``r.tool_calls.chain``): the calls of one chain share it |
| round | INTEGER | the request of the chain, from 1, whose answer asked for it |
| call_id | TEXT | the model's id of the call |
| name | TEXT | the tool's name |
| arguments_json | TEXT | the arguments, validated (or as the model sent them when they were not valid) |
| result | TEXT | what was sent back, redacted and capped; NULL after an error |
| error | TEXT | the one line sent back instead (a raise, a timeout, a denial, bad arguments) |
| approved | INTEGER | 1 approved, 0 denied, NULL when nobody was asked |
| seconds | REAL | the tool's own time |
| conversation | TEXT | the conversation's name |
| notebook | TEXT | the notebook's path |

``exchanges_fts``: an FTS5 index of ``exchanges.prompt`` and ``.response`` (external content),
where SQLite has FTS5; ``gatecell logs -q`` falls back to LIKE without it. The index is brought
up to date when it is searched (``fts_indexed`` holds the last ``exchanges.id`` it covers), not
by a trigger on every insert: indexing costs the writer more than the rest of a row, and a log
is written far more often than it is searched.

The version is ``PRAGMA user_version``; `migrate` applies the missing steps of `MIGRATIONS`
in order, each in one transaction, so several processes opening a new file at once are safe.
A file from a newer gatecell (a higher version) is used as it is.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

__all__ = ["MIGRATIONS", "VERSION", "migrate", "has_fts", "fts5_available", "index_new"]


def _tables(conn: sqlite3.Connection) -> None:
    conn.execute(
        """CREATE TABLE exchanges (
            id INTEGER PRIMARY KEY,
            time TEXT NOT NULL,
            endpoint TEXT NOT NULL,
            model TEXT,
            api TEXT,
            gateway TEXT,
            params_json TEXT,
            prompt TEXT,
            messages_json TEXT,
            response TEXT,
            reasoning TEXT,
            prompt_tokens INTEGER,
            completion_tokens INTEGER,
            reasoning_tokens INTEGER,
            total_tokens INTEGER,
            usage_json TEXT,
            latency REAL,
            status INTEGER,
            error TEXT,
            request_id TEXT,
            conversation TEXT,
            notebook TEXT,
            cached INTEGER NOT NULL DEFAULT 0,
            partial INTEGER NOT NULL DEFAULT 0,
            cache_key TEXT,
            media_type TEXT,
            media_size INTEGER,
            media_sha256 TEXT,
            media BLOB,
            response_json TEXT
        )"""
    )
    # Only answers can be cache hits: the index holds nothing else.
    conn.execute(
        "CREATE INDEX exchanges_answers ON exchanges (cache_key, time) "
        "WHERE cache_key IS NOT NULL AND error IS NULL AND partial = 0 AND cached = 0"
    )
    conn.execute("CREATE INDEX exchanges_time ON exchanges (time)")
    conn.execute("CREATE INDEX exchanges_model ON exchanges (model)")
    conn.execute("CREATE INDEX exchanges_conversation ON exchanges (conversation, time)")
    conn.execute(
        """CREATE TABLE jobs (
            id INTEGER PRIMARY KEY,
            gateway TEXT NOT NULL DEFAULT '',
            kind TEXT NOT NULL,
            job_id TEXT NOT NULL,
            model TEXT,
            prompt TEXT,
            state TEXT,
            progress REAL,
            error TEXT,
            notebook TEXT,
            created TEXT NOT NULL,
            updated TEXT NOT NULL,
            body_json TEXT,
            UNIQUE (gateway, kind, job_id)
        )"""
    )
    conn.execute("CREATE INDEX jobs_job_id ON jobs (job_id, updated)")
    conn.execute("CREATE INDEX jobs_updated ON jobs (updated)")


def fts5_available() -> bool:
    """Whether this SQLite was built with FTS5 (nearly all are)."""
    try:
        sqlite3.connect(":memory:").execute("CREATE VIRTUAL TABLE probe USING fts5(a)")
    except sqlite3.OperationalError:
        return False
    return True


def _search(conn: sqlite3.Connection) -> None:
    """Full-text search of prompts and replies, filled from the rows already there."""
    if not fts5_available():
        return
    conn.execute(
        "CREATE VIRTUAL TABLE exchanges_fts USING fts5"
        "(prompt, response, content='exchanges', content_rowid='id')"
    )
    conn.execute(
        """CREATE TRIGGER exchanges_fts_insert AFTER INSERT ON exchanges BEGIN
            INSERT INTO exchanges_fts (rowid, prompt, response) VALUES (new.id, new.prompt, new.response);
        END"""
    )
    conn.execute(
        """CREATE TRIGGER exchanges_fts_delete AFTER DELETE ON exchanges BEGIN
            INSERT INTO exchanges_fts (exchanges_fts, rowid, prompt, response)
            VALUES ('delete', old.id, old.prompt, old.response);
        END"""
    )
    conn.execute(
        """CREATE TRIGGER exchanges_fts_update AFTER UPDATE OF prompt, response ON exchanges BEGIN
            INSERT INTO exchanges_fts (exchanges_fts, rowid, prompt, response)
            VALUES ('delete', old.id, old.prompt, old.response);
            INSERT INTO exchanges_fts (rowid, prompt, response) VALUES (new.id, new.prompt, new.response);
        END"""
    )
    conn.execute("INSERT INTO exchanges_fts (exchanges_fts) VALUES ('rebuild')")


def _search_when_asked(conn: sqlite3.Connection) -> None:
    """Index rows when a search needs them (see `index_new`), not as they are written."""
    if not has_fts(conn):
        return
    conn.execute("DROP TRIGGER exchanges_fts_insert")
    conn.execute("CREATE TABLE fts_indexed (id INTEGER NOT NULL)")
    conn.execute("INSERT INTO fts_indexed SELECT coalesce(max(id), 0) FROM exchanges")
    for name in ("exchanges_fts_delete", "exchanges_fts_update"):  # only rows the index holds
        sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (name,)).fetchone()[0]
        conn.execute(f"DROP TRIGGER {name}")
        conn.execute(sql.replace(" BEGIN", " WHEN old.id <= (SELECT id FROM fts_indexed) BEGIN", 1))


def index_new(conn: sqlite3.Connection) -> bool:
    """Add the rows written since the last search to the FTS5 index; False when there is no
    index, or it cannot be brought up to date here (a read-only file): search by LIKE then."""
    if not has_fts(conn):
        return False
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            done = conn.execute("SELECT id FROM fts_indexed").fetchone()[0]
            conn.execute(
                "INSERT INTO exchanges_fts (rowid, prompt, response) "
                "SELECT id, prompt, response FROM exchanges WHERE id > ?",
                (done,),
            )
            conn.execute("UPDATE fts_indexed SET id = (SELECT coalesce(max(id), ?) FROM exchanges)", (done,))
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
    except sqlite3.OperationalError:
        return False
    return True


def _typed_answers(conn: sqlite3.Connection) -> None:
    """What a typed answer was asked to be, and the value read from it."""
    for column in ("schema_name", "schema_json", "parsed_json"):
        conn.execute(f"ALTER TABLE exchanges ADD COLUMN {column} TEXT")


def _costs(conn: sqlite3.Connection) -> None:
    """What each exchange cost and who said so; the prices of a gateway's model info. And two
    indexes fewer for every insert to keep up (each costs a commit a page write): none on
    ``model`` (``logs -m`` walks the newest rows instead), and the one on ``conversation``
    only over the rows that have one."""
    conn.execute("ALTER TABLE exchanges ADD COLUMN cost REAL")
    conn.execute("ALTER TABLE exchanges ADD COLUMN cost_source TEXT")
    conn.execute("DROP INDEX exchanges_model")
    conn.execute("DROP INDEX exchanges_conversation")
    conn.execute(
        "CREATE INDEX exchanges_conversation ON exchanges (conversation, time) WHERE conversation IS NOT NULL"
    )
    conn.execute(
        """CREATE TABLE model_prices (
            gateway TEXT NOT NULL,
            model TEXT NOT NULL,
            input_cost_per_token REAL,
            output_cost_per_token REAL,
            fetched TEXT NOT NULL,
            PRIMARY KEY (gateway, model)
        )"""
    )


def _embeddings(conn: sqlite3.Connection) -> None:
    """The vectors gateways gave, so that each text is embedded once: the float32 vectors of
    one answer in one blob (``embedding_blocks``), and for each text, by what makes its vector
    (the gateway, the model, the dimensions asked) and its hash, where its vector is. A blob
    per answer rather than per text: a row per 1.5 KB vector cost the writer four times more."""
    conn.execute(
        """CREATE TABLE embedding_blocks (
            id INTEGER PRIMARY KEY,
            width INTEGER NOT NULL,
            vectors BLOB NOT NULL,
            created TEXT NOT NULL
        )"""
    )
    conn.execute(
        """CREATE TABLE embeddings (
            gateway TEXT NOT NULL,
            model TEXT NOT NULL,
            dimensions INTEGER NOT NULL,
            text_sha256 BLOB NOT NULL,
            block INTEGER NOT NULL REFERENCES embedding_blocks (id),
            position INTEGER NOT NULL,
            PRIMARY KEY (gateway, model, dimensions, text_sha256)
        ) WITHOUT ROWID"""
    )


def _tool_calls(conn: sqlite3.Connection) -> None:
    """Every call of a tool chain, beside the exchange whose answer asked for it."""
    conn.execute(
        """CREATE TABLE tool_calls (
            id INTEGER PRIMARY KEY,
            time TEXT NOT NULL,
            exchange_id INTEGER REFERENCES exchanges (id),
            chain TEXT NOT NULL,
            round INTEGER NOT NULL,
            call_id TEXT,
            name TEXT NOT NULL,
            arguments_json TEXT,
            result TEXT,
            error TEXT,
            approved INTEGER,
            seconds REAL,
            conversation TEXT,
            notebook TEXT
        )"""
    )
    conn.execute("CREATE INDEX tool_calls_chain ON tool_calls (chain, round)")
    conn.execute("CREATE INDEX tool_calls_exchange ON tool_calls (exchange_id)")


MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [
    _tables,
    _search,
    _search_when_asked,
    _typed_answers,
    _costs,
    _embeddings,
    _tool_calls,
]
VERSION = len(MIGRATIONS)


def _version(conn: sqlite3.Connection) -> int:
    return conn.execute("PRAGMA user_version").fetchone()[0]


def migrate(conn: sqlite3.Connection, target: int = VERSION) -> int:
    """Apply the steps between the file's version and ``target``; return the version reached.

    ``conn`` must be in autocommit mode (``isolation_level=None``). Each step re-reads the
    version inside its write transaction, so a process that lost the race skips the step.
    """
    version = _version(conn)
    while version < target:
        conn.execute("BEGIN IMMEDIATE")
        try:
            version = _version(conn)
            if version < target:
                MIGRATIONS[version](conn)
                version += 1
                conn.execute(f"PRAGMA user_version = {version}")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:  # SQLite rolls back by itself on some errors (a full disk)
                conn.execute("ROLLBACK")
            raise
    return version


def has_fts(conn: sqlite3.Connection) -> bool:
    row = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'exchanges_fts'").fetchone()
    return row is not None
