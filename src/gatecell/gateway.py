"""`Gateway` and `AsyncGateway`: the endpoints of the wire, with the log, the cache and `map`.

A client is the wire's `Endpoints` (every method of SPEC section 4, checked, sent, parsed:
see `gatecell.wire`) run by a driver over httpx, with a `Journal` as its hooks: every
exchange logged in the store, and answered from it when the cache is on. `map` hands the
client's endpoints to the batch engine. Which gateway, when none is set, is
`gatecell.connect`'s policy: the local gateway, started on the first request, not when a
client is made (making a client, like making an ``httpx.Client``, does no I/O).
"""

from __future__ import annotations

import copy
from collections.abc import Coroutine, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

import httpx

from gatecell import connect
from gatecell.journal import LOCAL, Journal
from gatecell.wire.apis.jobs import JobPaths
from gatecell.wire.apis.routing import PatternLike
from gatecell.wire.apis.spec import ChatCompletion
from gatecell.wire.apis.streams import (
    AsyncChatStream,
    AsyncClosing,
    AsyncTextStream,
    ChatStream,
    Closing,
    TextStream,
)
from gatecell.wire.calls import Options
from gatecell.wire.endpoints import Endpoints
from gatecell.wire.transport._httpx_proxies import ProxiedTransport
from gatecell.wire.transport.drivers import AsyncSend, SyncSend, arun, async_httpx_sender, httpx_sender, run
from gatecell.wire.transport.exchange import Program
from gatecell.wire.transport.proxies import Proxies, Proxy, check_proxies
from gatecell.wire.transport.results import Audio, ImageResult, Job, ModelList, Reply
from gatecell.wire.transport.settings import Settings, env_choice, env_flag, resolve, root_url
from gatecell.wire.typed.structured import MODES, Support
from gatecell.wire.util.secret import Secret

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from gatecell.batch import Batch, MapOptions, OnRow
    from gatecell.batch.embed import EmbedEngine, EmbedOptions
    from gatecell.wire.apis.vectors import Vectors

__all__ = ["Gateway", "AsyncGateway"]

T = TypeVar("T")
C = TypeVar("C", bound="_Client")


class _Client:
    """What both clients add to the wire's endpoints: settings from the environment, the
    journal, the local gateway on first use, an httpx client. Its parameters are
    `Gateway`'s."""

    api_key: Secret | None
    usage_known: bool
    _http: Any

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | Secret | None = None,
        *,
        timeout: float | None = None,
        connect_timeout: float | None = None,
        stream_idle_timeout: float | None = None,
        request_timeout: float | None = None,
        max_retries: int | None = None,
        max_response_bytes: int | None = None,
        stream_usage: bool | None = None,
        reasoning_patterns: Iterable[PatternLike] | None = None,
        job_paths: JobPaths | None = None,
        backoff: float = 0.5,
        retry_after_cap: float = 60.0,
        job_interval: float = 2.0,
        log: bool | None = None,
        cache: bool | None = None,
        log_media: bool | None = None,
        proxy: str | Proxy | None = None,
        trust_env: bool = True,
        http_client: Any = None,
        structured: str | None = None,
    ) -> None:
        settings = resolve(base_url, api_key)
        support = Support(env_choice(structured, "GATECELL_STRUCTURED", MODES, "auto"))
        self.log = env_flag(log, "GATECELL_LOG", True)
        self.cache = env_flag(cache, "GATECELL_CACHE", False)
        self.log_media = env_flag(log_media, "GATECELL_LOG_MEDIA", False)
        self.journal = Journal(
            LOCAL,
            key=lambda: self.api_key,
            log=lambda: self.log,
            cache=lambda: self.cache,
            log_media=lambda: self.log_media,
        )
        options = Options.resolve(
            timeout=timeout,
            connect_timeout=connect_timeout,
            stream_idle_timeout=stream_idle_timeout,
            request_timeout=request_timeout,
            max_retries=max_retries,
            max_response_bytes=max_response_bytes,
            stream_usage=stream_usage,
            job_paths=job_paths,
            backoff=backoff,
            retry_after_cap=retry_after_cap,
            job_interval=job_interval,
        )
        super().__init__(  # type: ignore[call-arg]
            settings.base_url,
            settings.api_key,
            options=options,
            locate=self._choose,
            reasoning_patterns=list(reasoning_patterns) if reasoning_patterns is not None else None,
            hooks=self.journal,
            support=support,
        )
        self.proxies = Proxies(proxy, trust_env=trust_env)  # a malformed proxy fails here
        check_proxies(self.proxies)  # and one neither driver can speak
        local = True  # with nothing configured, the local gateway
        if settings.base_url:
            local = connect.is_local(settings.base_url)
            self._target(settings.base_url, local)
        self._routes = None if local else self.proxies  # the local gateway: always direct
        self._owns_http = http_client is None
        self._http = http_client or self._new_http(
            httpx.Timeout(options.timeout, connect=options.connect_timeout), self._routes
        )
        self._send = self._sender(self._http)

    def _new_http(self, timeout: httpx.Timeout, proxies: Proxies | None) -> Any:
        """gatecell's own httpx client: through the proxies their rules name, or (None) direct."""
        raise NotImplementedError

    def _sender(self, http: Any) -> Any:
        raise NotImplementedError

    def _choose(self) -> Settings:
        """Where requests go when nothing says: `connect.choose` (the local gateway)."""
        target = connect.choose()
        self._target(target.base_url, target.local)
        return target

    @property
    def local(self) -> bool:
        """Whether this client talks to the local gateway (embedded, or ``gatecell lab``'s);
        with nothing configured it will, from its first request."""
        return self.journal.gateway == LOCAL

    def clone(self: C) -> C:
        """A client with this one's gateway, key, options and switches, and a connection pool
        of its own: for another thread or event loop (httpx's async connections belong to the
        loop that opened them). Its pool is gatecell's own, even if this one's was yours."""
        twin = copy.copy(self)
        twin._owns_http = True
        twin._http = self._new_http(self._http.timeout, self._routes)
        twin._send = twin._sender(twin._http)
        return twin

    def _chain(self, fields: dict[str, Any]) -> Any:
        """``tools=`` and its options, taken out of ``fields``: a `gatecell.tools.Chain`."""
        from gatecell.tools.loop import OPTIONS, Chain

        chain = Chain.of({name: fields.pop(name) for name in OPTIONS if name in fields})
        chain.log = self.journal.tool_call
        chain.asynchronous = isinstance(self, AsyncGateway)
        return chain

    def _resumption(self, chain: str, options: dict[str, Any]) -> Any:
        """What resuming ``chain`` takes (`gatecell.tools.resume`), the options checked."""
        from gatecell.tools.loop import OPTIONS, Chain
        from gatecell.tools.resume import resumption

        asked = Chain.of({name: options[name] for name in OPTIONS if name in options})
        return resumption(self.journal.store.chain(chain), chain, asked)

    def _target(self, base_url: str, local: bool) -> None:
        self.journal.gateway = LOCAL if local else root_url(base_url.partition("?")[0])
        self.usage_known = local  # the local gateway reports usage on streams when asked


class Gateway(
    _Client,
    Endpoints[ChatCompletion, ChatStream, Reply, TextStream, ImageResult, Audio, ModelList, Job],
    Closing,
):
    """The synchronous client: ``with Gateway() as gw: gw.chat(...)``.

    Every method of SPEC section 4 (chat, messages, generate_content, responses, converse,
    image, speech, models, imagine, video, music, job, wait) and `map`, each exchange logged
    (and answered from the log with ``cache``). Making one does no I/O.

    **Parameters:**

    * **base_url** - the gateway's address (``{base_url}`` or ``{base_url}/v1``; a query such
      as ``?api-version=...`` goes on every request), else ``GATECELL_BASE_URL``, else the
      local gateway, started on the first request.
    * **api_key** - its key (a str or a `Secret`), else ``GATECELL_API_KEY``.
    * **timeout** - seconds for each read or write (``GATECELL_TIMEOUT``, 60).
    * **connect_timeout** - seconds to open a connection (``GATECELL_CONNECT_TIMEOUT``, 5).
    * **request_timeout** - seconds for the whole of a non-streaming request, each attempt
      (``GATECELL_REQUEST_TIMEOUT``, 600).
    * **stream_idle_timeout** - the longest silence of a stream between events
      (``GATECELL_STREAM_IDLE_TIMEOUT``, 60).
    * **max_retries** - retries of 408, 409, 429, 5xx and connection errors
      (``GATECELL_MAX_RETRIES``, 2); **backoff** - the first backoff in seconds (0.5), doubled
      each time; **retry_after_cap** - the longest wait a gateway's Retry-After gets (60).
    * **max_response_bytes** - one cap for every body (``GATECELL_MAX_RESPONSE_BYTES``; else
      64 MiB for JSON and streams, 512 MiB for media).
    * **stream_usage** - chat streams ask for their usage (``stream_options``); None: where the
      gateway is known to take it (``GATECELL_STREAM_USAGE``).
    * **reasoning_patterns** - model names (or patterns) that go to /v1/responses
      (see `gatecell.wire.apis.routing`).
    * **job_paths**, **job_interval** - where jobs are polled, and how often (seconds, 2).
    * **log**, **cache**, **log_media** - log every exchange (``GATECELL_LOG``, on), answer
      from the log (``GATECELL_CACHE``, off), keep media bytes in it (``GATECELL_LOG_MEDIA``,
      off); each can be changed later as an attribute.
    * **proxy** - a proxy for every request (``http://user:pass@host:3128``, ``https://``,
      ``socks5://``, ``socks5h://``: SOCKS needs ``gatecell[socks]``), else ``GATECELL_PROXY``,
      else ``HTTPS_PROXY``, ``HTTP_PROXY``, ``ALL_PROXY`` and ``NO_PROXY`` (see
      `gatecell.wire.transport.proxies`; the local gateway is always reached directly). A proxy URL no
      driver can speak is a `ConfigError` here, in one line.
    * **trust_env** - read those proxy variables (True).
    * **http_client** - an ``httpx.Client`` of your own (``httpx.AsyncClient`` for
      `AsyncGateway`), for certificates or transports gatecell does not set up: used as it is
      (its proxies are its own; `map` still uses gatecell's lean driver), gatecell's redirect
      rules, caps and timeouts still apply to every request, and it is yours to close.
    * **structured** - how typed answers (``schema=``, ``choices=``) are asked for: ``"auto"``
      (natively where the gateway's metadata says the model takes it, else by instruction),
      ``"native"`` or ``"instruction"`` (``GATECELL_STRUCTURED``; see `gatecell.wire.typed.typed_calls`).
    """

    _chat_stream = ChatStream
    _text_stream = TextStream
    _http: httpx.Client

    def _new_http(self, timeout: httpx.Timeout, proxies: Proxies | None) -> httpx.Client:
        if proxies is None:
            return httpx.Client(timeout=timeout, trust_env=False)
        return httpx.Client(
            timeout=timeout,
            transport=ProxiedTransport(proxies, lambda proxy: httpx.HTTPTransport(proxy=proxy)),
        )

    def _sender(self, http: httpx.Client) -> SyncSend:
        return httpx_sender(http)

    def _run(self, program: Program[T]) -> T:
        return run(program, self._send)

    def map(
        self,
        template: str,
        data: Any,
        *,
        progress: bool = True,
        on_row: OnRow | None = None,
        **options: Unpack[MapOptions],
    ) -> Batch:
        """One prompt per row of ``data``: ``template``'s ``{field}`` filled from the row (a
        DataFrame's columns, ``{item}`` for plain values), sent with up to ``concurrency``
        requests at once within ``rpm``/``tpm``; a `Batch` of the replies, with a progress bar.
        The options (model, api, system, temperature, top_p, max_tokens, concurrency, rpm,
        tpm, max_retries, patience, cache, on_error, images) are `gatecell.batch.MapOptions`.
        A field whose value is a picture (a PIL image, bytes, a figure, a ``pathlib`` path)
        puts the picture in the prompt; a string stays text, whatever it names, unless its
        column is named in ``images`` (``images="photo"``): then it is a path or URL to attach.

        Finished rows are logged and, with ``cache`` (the default), answered from the log, so
        running it again after an interrupt sends only the rest. A row that still fails after
        its retries records its error (``on_error="raise"``: `BatchError`). Ctrl-C returns
        the rows done so far. ``on_row(position, row)`` gets each row as it finishes (in the
        map's own thread; keep it quick), and the Batch then keeps no replies, only each
        row's outcome (error, usage, provenance). See `gatecell.batch`.
        """
        from gatecell.batch import run_map

        self.base_url  # noqa: B018  (where: decided before the rows are)
        return run_map(self, self._routes, template, data, progress=progress, on_row=on_row, **options)

    def embed(
        self,
        texts: Any,
        *,
        progress: bool = True,
        labels: Any = None,
        **options: Unpack[EmbedOptions],
    ) -> Vectors:
        """The vectors of ``texts`` (a list of strings, or one): a `Vectors`, numpy float32 of
        shape (n, d), one row per text in their order, with ``.meta`` (model, dimensions,
        whether rows are L2-normalised, what was sent, tokens, cost).

        Each text is embedded once, ever: duplicates are sent once, and vectors are kept in
        the store, so a re-run (in any process) sends none of the texts it holds. The rest go
        in batches (``batch_size`` texts, ``batch_tokens`` estimated tokens), ``concurrency``
        at once within ``rpm``/``tpm``; a batch refused as too large is split in half until
        it passes, a text refused alone fails the call in one line (what came back before is
        kept). Options (model, dimensions, batch_size, batch_tokens, concurrency, rpm, tpm,
        max_retries, patience, cache) are `gatecell.batch.embed.EmbedOptions`; ``labels``
        name the texts in errors (a DataFrame's index). Ctrl-C stops it; see
        `gatecell.batch.embed`.
        """
        from gatecell.batch import drive

        http = _async_http(self._http.timeout, self._routes)
        engine = _embedder(self, texts, labels, options, async_httpx_sender(http), http.aclose)
        return drive(engine, progress and engine.to_send > 0, "embed", "texts")

    def resume(self, chain: str, **options: Any) -> Any:
        """Go on with the tool chain ``chain`` (``r.tool_calls.chain``) that was cut short:
        the calls of its last round that finished are not run again (their results come from
        the log), the others run now, then the model goes on. ``tools=`` again (the log keeps
        calls, not code), and any option of ``chat``'s ``tools=``. See `gatecell.tools.resume`."""
        plan = self._resumption(chain, options)
        plan.pending.run()
        method = getattr(self, plan.method)
        return plan.finished(method(**plan.arguments(), **options))

    def close(self) -> None:
        if self._owns_http:
            self._http.close()


class AsyncGateway(
    _Client,
    Endpoints[
        Coroutine[Any, Any, ChatCompletion],
        Coroutine[Any, Any, AsyncChatStream],
        Coroutine[Any, Any, Reply],
        Coroutine[Any, Any, AsyncTextStream],
        Coroutine[Any, Any, ImageResult],
        Coroutine[Any, Any, Audio],
        Coroutine[Any, Any, ModelList],
        Coroutine[Any, Any, Job],
    ],
    AsyncClosing,
):
    """The asynchronous client: `Gateway`'s methods and parameters, awaited; streams are used
    with ``async for``, and `map` runs on the caller's event loop."""

    _chat_stream = AsyncChatStream
    _text_stream = AsyncTextStream
    _http: httpx.AsyncClient

    def _new_http(self, timeout: httpx.Timeout, proxies: Proxies | None) -> httpx.AsyncClient:
        return _async_http(timeout, proxies)

    def _sender(self, http: httpx.AsyncClient) -> AsyncSend:
        return async_httpx_sender(http)

    def _run(self, program: Program[T]) -> Coroutine[Any, Any, T]:
        return arun(program, self._send)

    async def map(
        self,
        template: str,
        data: Any,
        *,
        progress: bool = True,
        on_row: OnRow | None = None,
        **options: Unpack[MapOptions],
    ) -> Batch:
        """`Gateway.map`, on the running event loop (``on_row`` is called on it)."""
        from gatecell.batch import arun_map

        self.base_url  # noqa: B018  (where: decided before the rows are)
        return await arun_map(
            self,
            self._routes,
            template,
            data,
            progress=progress,
            on_row=on_row,
            **options,
        )

    async def embed(
        self,
        texts: Any,
        *,
        progress: bool = True,
        labels: Any = None,
        **options: Unpack[EmbedOptions],
    ) -> Vectors:
        """`Gateway.embed`, on the running event loop."""
        from gatecell.batch import adrive

        engine = _embedder(self, texts, labels, options, self._send)
        return await adrive(engine, progress and engine.to_send > 0, "embed", "texts")

    async def resume(self, chain: str, **options: Any) -> Any:
        """`Gateway.resume`, awaited."""
        plan = self._resumption(chain, options)
        await plan.pending.arun()
        method = getattr(self, plan.method)
        return plan.finished(await method(**plan.arguments(), **options))

    async def aclose(self) -> None:
        if self._owns_http:
            await self._http.aclose()


def _async_http(timeout: httpx.Timeout, proxies: Proxies | None) -> httpx.AsyncClient:
    """gatecell's own async httpx client: through the proxies their rules name, or (None) direct."""
    if proxies is None:
        return httpx.AsyncClient(timeout=timeout, trust_env=False)
    return httpx.AsyncClient(
        timeout=timeout,
        transport=ProxiedTransport(proxies, lambda proxy: httpx.AsyncHTTPTransport(proxy=proxy)),
    )


def _embedder(
    client: Gateway | AsyncGateway,
    texts: Any,
    labels: Any,
    options: EmbedOptions,
    send: AsyncSend,
    close: Any = None,
) -> EmbedEngine:
    """The engine of one ``embed`` call: its texts and options checked now (one line each,
    before any request), the gateway decided."""
    from gatecell.batch.embed import EmbedEngine, resolve_embed, texts_of

    settings = resolve_embed(options)
    checked = texts_of(texts, labels)
    client.base_url  # noqa: B018  (where: decided before the texts are)
    return EmbedEngine(client, checked, settings, send, close)
