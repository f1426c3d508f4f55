"""The local gateway's options, gathered in one frozen value.

Every option has an environment variable so that `gatecell serve`, the embedded gateway and
tests configure it the same way; explicit arguments win over the environment.
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gatecell.wire.transport.settings import env_number, home, root_url
from gatecell.wire.util.private import Untrusted, private_folder, read_private, write_private
from gatecell.wire.util.secret import Secret

__all__ = [
    "Config",
    "new_key",
    "keys_from",
    "keys_in_file",
    "default_max_connections",
    "ENV_KEYS",
    "ENV_KEY_FILE",
    "ENV_PACE",
    "ENV_JOB_SECONDS",
    "ENV_MAX_BODY",
    "ENV_MAX_RELAY",
    "ENV_DATA",
    "ENV_EMBED",
    "MEMORY",
    "local_data",
    "home_key",
    "key_file",
]

ENV_KEYS = "GATECELL_LOCAL_KEYS"  # comma separated; visible in the process environment only
ENV_KEY_FILE = "GATECELL_LOCAL_KEY_FILE"  # a file with one key per line
ENV_PACE = "GATECELL_LOCAL_PACE"  # seconds between streamed tokens
ENV_JOB_SECONDS = "GATECELL_LOCAL_JOB_SECONDS"  # how long a video/imagine/music job takes
ENV_MAX_BODY = "GATECELL_LOCAL_MAX_BODY"  # bytes
ENV_MAX_RELAY = "GATECELL_LOCAL_MAX_RELAY"  # bytes of one upstream answer relayed to a client
ENV_DATA = "GATECELL_LOCAL_DATA"  # the folder of jobs and files; MEMORY: none
ENV_EMBED = (
    "GATECELL_LOCAL_EMBED"  # auto: local-embed where gatecell[embed] is installed; ngram: the fallback only
)
MEMORY = ":memory:"
KEY_FILE = "local-key"  # in GATECELL_HOME: the local gateway's own key, see `home_key`

DEFAULT_PACE = 0.008
DEFAULT_JOB_SECONDS = 4.0
DEFAULT_MAX_BODY = 10 * 1024 * 1024
DEFAULT_MAX_RELAY = 1024 * 1024 * 1024

# The limits that keep one client from starving the others, each with its variable; their
# defaults are those of the `Config` fields.
_LIMITS = {
    "job_queue": "GATECELL_LOCAL_JOB_QUEUE",
    "job_queue_per_key": "GATECELL_LOCAL_JOB_QUEUE_PER_KEY",
    "jobs_kept": "GATECELL_LOCAL_JOBS_KEPT",
    "media_bytes": "GATECELL_LOCAL_MEDIA_BYTES",
    "head_timeout": "GATECELL_LOCAL_HEAD_TIMEOUT",
    "idle_timeout": "GATECELL_LOCAL_IDLE_TIMEOUT",
    "max_connections": "GATECELL_LOCAL_MAX_CONNECTIONS",
    "max_age": "GATECELL_LOCAL_MAX_AGE",
    "embed_inputs": "GATECELL_LOCAL_EMBED_INPUTS",
    "embed_chars": "GATECELL_LOCAL_EMBED_CHARS",
}


def new_key() -> Secret:
    """A fresh random key of the SPEC 5 form ``sk-...``."""
    return Secret("sk-local-" + secrets.token_urlsafe(24))


MIN_KEY = 16  # characters of a local gateway's key at least: every local user can try keys


def _long_enough(keys: tuple[Secret, ...], where: str) -> tuple[Secret, ...]:
    short = next((k for k in keys if len(k.reveal()) < MIN_KEY), None)
    if short is not None:
        raise ValueError(
            f"a key in {where} has {len(short.reveal())} characters; the local gateway takes keys of "
            f"{MIN_KEY} or more (any local user can try keys): make a long random one"
        )
    return keys


def keys_from(api_keys: str | Secret | Sequence[str | Secret] | None) -> tuple[Secret, ...]:
    """Keys given explicitly, else from GATECELL_LOCAL_KEYS; empty when neither has any.
    A key shorter than `MIN_KEY` is a ValueError."""
    where = "the keys given" if api_keys is not None else ENV_KEYS
    if api_keys is None:
        api_keys = os.environ.get(ENV_KEYS, "")
    items: Sequence[str | Secret]
    if isinstance(api_keys, (str, Secret)):
        raw = api_keys.reveal() if isinstance(api_keys, Secret) else api_keys
        items = raw.split(",")
    else:
        items = api_keys
    found = []
    for key in items:
        value = (key.reveal() if isinstance(key, Secret) else str(key)).strip()
        if value:
            found.append(Secret(value))
    return _long_enough(tuple(found), where)


def keys_in_file(path: str | os.PathLike[str]) -> tuple[Secret, ...]:
    """The keys of a key file: one per line; blank lines and lines starting with ``#`` are skipped.

    A file keeps keys out of ``ps`` and shell history, which ``--api-key`` does not, if it is
    the user's own and no one else may read or write it: a file another user owns, one that
    others may read or write, or a symbolic link is refused (`gatecell.wire.util.private`), as is a
    key shorter than `MIN_KEY`. Each refusal is a ValueError of one line.
    """
    name = repr(os.fspath(path))
    try:
        lines = read_private(path, tighten=False).decode("utf-8").splitlines()
    except Untrusted as exc:
        raise ValueError(f"the key file {name} is not used: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read the key file {name}: {exc.__class__.__name__}") from None
    keys = tuple(Secret(s) for s in (line.strip() for line in lines) if s and not s.startswith("#"))
    if not keys:
        raise ValueError(f"the key file {name} holds no key (one key per line)")
    return _long_enough(keys, f"the key file {name}")


def local_data() -> str:
    """Where ``gatecell serve`` and the embedded gateway keep jobs and files:
    GATECELL_LOCAL_DATA, else ``local`` in GATECELL_HOME (next to the log)."""
    return os.environ.get(ENV_DATA) or str(home() / "local")


def key_file() -> Path:
    return home() / KEY_FILE


def home_key() -> Secret:
    """The local gateway's own key when none is configured: kept in ``GATECELL_HOME/local-key``
    (made on first use, 0600 in a 0700 folder), so that a restarted gateway, with a new port,
    still owns the jobs and files it made (they belong to the key's digest, `auth.owner_of`).

    The file is what a process of this user could read anyway (the key is in the kernel's
    memory and, under ``gatecell lab``, its environment); another user can neither read it
    nor, without it, use the gateway. A file another user owns, or that others may read, is
    not trusted: a new key replaces it, said in one line on stderr.
    """
    path = key_file()
    private_folder(path.parent)
    key = _read_key(path)
    if key is not None:
        return key
    fresh = new_key()
    if path.exists() or path.is_symlink():  # refused above: replaced
        write_private(path, fresh.reveal().encode())
        return fresh
    tmp = path.with_name(f".{KEY_FILE}-{secrets.token_hex(4)}")
    write_private(tmp, fresh.reveal().encode())
    try:
        os.link(tmp, path)  # at once and only if absent: two kernels starting together agree
    except FileExistsError:
        pass
    finally:
        tmp.unlink(missing_ok=True)
    return _read_key(path) or fresh


def _read_key(path: Path) -> Secret | None:
    try:
        stat = path.lstat()
    except FileNotFoundError:
        return None
    if os.name == "posix" and (
        not path.is_file() or path.is_symlink() or stat.st_uid != os.getuid() or stat.st_mode & 0o077
    ):
        print(
            f"gatecell: {path} is not a private file of this user (another user may know the key in it); "
            "the local gateway makes a new key",
            file=sys.stderr,
        )
        return None
    key = path.read_text(encoding="utf-8", errors="replace").strip()
    return Secret(key) if key else None


def default_max_connections() -> int:
    """Half the process's file descriptor limit (at most 4096): the rest stays for files,
    upstream connections and the connection that evicts an idle one."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):
        return 1024
    if soft == resource.RLIM_INFINITY:
        return 4096
    return max(8, min(4096, soft // 2))


@dataclass(frozen=True)
class Config:
    """What one gateway instance does. Build it with `Config.create` to get env fallbacks."""

    api_keys: tuple[Secret, ...]
    pace: float = DEFAULT_PACE
    job_seconds: float = DEFAULT_JOB_SECONDS
    max_body: int = DEFAULT_MAX_BODY
    max_relay: int = DEFAULT_MAX_RELAY
    upstream: str | None = None
    upstream_key: Secret | None = field(default=None, repr=False)
    generated_key: bool = (
        False  # no key was configured; api_keys holds the gateway's own (random, or `home_key`)
    )
    public_url: str | None = None  # root URL of the files handed out; else the connection's own address
    job_queue: int = 16  # unfinished jobs of all keys together; more are refused with 429
    job_queue_per_key: int = 8  # unfinished jobs of one key
    jobs_kept: int = 1000  # jobs listed (and pollable); the oldest go first, with their files
    media_bytes: int = 512 * 1024 * 1024  # generated files kept in memory
    head_timeout: float = 10.0  # seconds a client has to send a whole request head
    idle_timeout: float = 30.0  # seconds a connection may stay silent (between requests, mid-body)
    max_connections: int = 0  # open connections at most; 0: `default_max_connections()`
    max_age: float = 7 * 86400.0  # seconds jobs and files are kept at most
    data: Path | None = None  # the folder of jobs and files, which outlive the gateway; None: memory
    embed: str = "auto"  # the embedding models served: see ENV_EMBED
    embed_inputs: int = 2048  # inputs of one /v1/embeddings request (documents of a rerank), as OpenAI
    embed_chars: int = 32768  # characters of one input (about OpenAI's 8,192 tokens)

    @classmethod
    def create(
        cls,
        api_keys: str | Secret | list | tuple | None = None,
        *,
        api_key_file: str | os.PathLike[str] | None = None,
        pace: float | None = None,
        job_seconds: float | None = None,
        max_body: int | None = None,
        max_relay: int | None = None,
        upstream: str | None = None,
        upstream_key_env: str = "GATECELL_UPSTREAM_KEY",
        public_url: str | None = None,
        data: str | os.PathLike[str] | None = None,
        embed: str | None = None,
        **limits: float | None,
    ) -> Config:
        """Fill what is not given from the environment; generate a key when there is none.

        Keys given here (`api_keys`, `api_key_file`) replace those of the environment
        (GATECELL_LOCAL_KEYS, GATECELL_LOCAL_KEY_FILE). `limits` are the fields job_queue,
        job_queue_per_key, jobs_kept, media_bytes, head_timeout, idle_timeout,
        max_connections, max_age, embed_inputs and embed_chars, each with its GATECELL_LOCAL_*
        variable. `data` (else GATECELL_LOCAL_DATA) is the folder of jobs and files; none, or
        `MEMORY`: in memory. `embed` (else GATECELL_LOCAL_EMBED) is ``auto`` or ``ngram``.
        """
        unknown = set(limits) - set(_LIMITS)
        if unknown:
            raise TypeError(f"unknown gateway option {sorted(unknown)[0]!r}")
        if api_keys is not None or api_key_file is not None:
            keys = keys_from(api_keys or ()) + (keys_in_file(api_key_file) if api_key_file else ())
        else:
            env_file = os.environ.get(ENV_KEY_FILE)
            keys = keys_from(None) + (keys_in_file(env_file) if env_file else ())
        pace = env_number(pace, ENV_PACE, DEFAULT_PACE)
        job_seconds = env_number(job_seconds, ENV_JOB_SECONDS, DEFAULT_JOB_SECONDS)
        max_body = env_number(max_body, ENV_MAX_BODY, DEFAULT_MAX_BODY)
        max_relay = env_number(max_relay, ENV_MAX_RELAY, DEFAULT_MAX_RELAY)
        if pace < 0 or job_seconds < 0 or max_body < 1 or max_relay < 1:
            raise ValueError("pace and job_seconds must be >= 0, max_body and max_relay >= 1")
        chosen: dict[str, float] = {}
        for name, env in _LIMITS.items():
            given = limits.get(name)
            default = cls.__dataclass_fields__[name].default
            assert isinstance(default, (int, float))
            value = env_number(given, env, default)
            if value < 0 or (value == 0 and name != "max_connections"):
                raise ValueError(f"{name} ({env}) must be above 0, got {value!r}")
            chosen[name] = value
        embed = embed or os.environ.get(ENV_EMBED) or "auto"
        if embed not in ("auto", "ngram"):
            raise ValueError(f"embed ({ENV_EMBED}) must be auto or ngram, got {embed!r:.40}")
        upstream_key = os.environ.get(upstream_key_env) if upstream else None
        folder = os.fspath(data) if data is not None else os.environ.get(ENV_DATA, "")
        public_url = public_url or os.environ.get("GATECELL_LOCAL_PUBLIC_URL") or None
        return cls(
            api_keys=keys or (new_key(),),
            generated_key=not keys,
            pace=pace,
            job_seconds=job_seconds,
            max_body=max_body,
            max_relay=max_relay,
            upstream=root_url(upstream) if upstream else None,
            upstream_key=Secret(upstream_key) if upstream_key else None,
            public_url=root_url(public_url) if public_url else None,
            job_queue=int(chosen["job_queue"]),
            job_queue_per_key=int(chosen["job_queue_per_key"]),
            jobs_kept=int(chosen["jobs_kept"]),
            media_bytes=int(chosen["media_bytes"]),
            head_timeout=chosen["head_timeout"],
            idle_timeout=chosen["idle_timeout"],
            max_connections=int(chosen["max_connections"]),
            max_age=chosen["max_age"],
            data=Path(folder).expanduser() if folder and folder != MEMORY else None,
            embed=embed,
            embed_inputs=int(chosen["embed_inputs"]),
            embed_chars=int(chosen["embed_chars"]),
        )

    @classmethod
    def lasting(cls, **options: Any) -> Config:
        """`create` for a gateway whose jobs and files outlive it (``gatecell serve``, the
        embedded gateway): kept in `local_data` unless ``data`` says otherwise, and owned
        through `home_key` when no key is configured, so that a restart finds them. Where
        that folder cannot be written (a read-only disk), they are kept in memory, with a
        key of the process's own, and one line on stderr says so: the gateway still runs."""
        if options.get("data") is None:
            options["data"] = local_data()
        configured = options.get("api_keys") is not None or options.get("api_key_file") is not None
        configured = configured or bool(keys_from(None) or os.environ.get(ENV_KEY_FILE))
        try:
            if str(options["data"]) != MEMORY:
                _probe(Path(options["data"]).expanduser())
            if not configured:
                options["api_keys"] = home_key()
                return dataclasses.replace(cls.create(**options), generated_key=True)
        except OSError as exc:
            print(
                f"gatecell: the local gateway cannot keep its jobs and files ({exc}); they end with it",
                file=sys.stderr,
            )
            options["data"] = MEMORY
        return cls.create(**options)


def _probe(folder: Path) -> None:
    """Make ``folder`` (private) and write in it once: OSError when it cannot be used, or when
    it, or a folder of it that the stores use (jobs, leases, each key's files), is not this
    user's alone (`gatecell.wire.util.private.Untrusted`)."""
    import tempfile

    with tempfile.TemporaryFile(dir=private_folder(folder)):
        pass
    for part in ("jobs", "leases", "files"):
        private_folder(folder / part)
    for owner in os.scandir(folder / "files"):
        if owner.is_dir(follow_symlinks=False):
            private_folder(owner.path)
