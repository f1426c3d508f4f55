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
from gatecell.wire.calls import Options
from gatecell.wire.drivers import AsyncSend, SyncSend, arun, async_httpx_sender, httpx_sender, run
from gatecell.wire.endpoints import Endpoints
from gatecell.wire.exchange import Program
from gatecell.wire.httpx_proxies import ProxiedTransport
from gatecell.wire.jobs import JobPaths
from gatecell.wire.proxies import Proxies, Proxy
from gatecell.wire.results import Audio, ImageResult, Job, ModelList, Reply
from gatecell.wire.routing import PatternLike
from gatecell.wire.schemas import ChatCompletion
from gatecell.wire.secret import Secret
from gatecell.wire.settings import Settings, env_choice, env_flag, resolve, root_url
from gatecell.wire.streams import (
    AsyncChatStream,
    AsyncClosing,
    AsyncTextStream,
    ChatStream,
    Closing,
    TextStream,
)
from gatecell.wire.structured import MODES, Support

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from gatecell.batch import Batch, MapOptions, OnRow

__all__ = ["Gateway", "AsyncGateway"]

T = TypeVar("T")
C = TypeVar("C", bound="_Client")


class _Client:
    """What both clients add to the wire's endpoints: settings from the environment, the
    journal, the local gateway on first use, an httpx client.

    **Parameters:** ``base_url`` (``{base_url}`` or ``{base_url}/v1``; a query such as
    ``?api-version=...`` goes on every request) and ``api_key``, else their environment
    variables, else the local gateway; ``timeout``, ``connect_timeout``,
    ``request_timeout``, ``stream_idle_timeout``, ``max_retries``, ``max_response_bytes``,
    ``stream_usage``, ``job_paths``, ``backoff``, ``retry_after_cap``, ``job_interval`` (see
    `gatecell.wire.calls.Options`);
    ``reasoning_patterns``: model names that go to /v1/responses (see
    `gatecell.wire.routing`); ``structured``: how typed answers are asked for, ``"auto"``
    (natively where the gateway's metadata says the model takes it, else by instruction),
    ``"native"`` or ``"instruction"``, else ``GATECELL_STRUCTURED`` (see
    `gatecell.wire.typed_calls`); ``log``, ``cache``, ``log_media``: the store's switches for
    this client (each can be changed later as an attribute); ``proxy``: a proxy for every
    request (``http://user:pass@host:3128``), else ``GATECELL_PROXY``, else the environment's
    ``HTTPS_PROXY``, ``HTTP_PROXY``, ``ALL_PROXY`` and ``NO_PROXY`` unless ``trust_env`` is
    False (see `gatecell.wire.proxies`; the local gateway is always reached directly);
    ``http_client``: an ``httpx.Client`` (``httpx.AsyncClient`` for `AsyncGateway`) of your
    own, for certificates or transports gatecell does not set up: it is used as it is (its
    proxies are its own), gatecell's redirect rules, caps and timeouts still apply to every
    request, and it is yours to close.
    """

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
    """Synchronous client. ``with Gateway() as gw: gw.chat(...)``. Parameters: see `_Client`."""

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
        tpm, max_retries, patience, cache, on_error) are `gatecell.batch.MapOptions`.

        Finished rows are logged and, with ``cache`` (the default), answered from the log, so
        running it again after an interrupt sends only the rest. A row that still fails after
        its retries records its error (``on_error="raise"``: `BatchError`). Ctrl-C returns
        the rows done so far. ``on_row(position, row)`` gets each row as it finishes (in the
        map's own thread; keep it quick), and the Batch then keeps no replies, only each
        row's outcome (error, usage, provenance). See `gatecell.batch`.
        """
        from gatecell.batch import run as run_map

        self.base_url  # noqa: B018  (where: decided before the rows are)
        gateway, routes = self.journal.gateway, self._routes
        return run_map(self, gateway, routes, template, data, progress=progress, on_row=on_row, **options)

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
    """Asynchronous client: the same methods, awaited; streams are used with ``async for``."""

    _chat_stream = AsyncChatStream
    _text_stream = AsyncTextStream
    _http: httpx.AsyncClient

    def _new_http(self, timeout: httpx.Timeout, proxies: Proxies | None) -> httpx.AsyncClient:
        if proxies is None:
            return httpx.AsyncClient(timeout=timeout, trust_env=False)
        return httpx.AsyncClient(
            timeout=timeout,
            transport=ProxiedTransport(proxies, lambda proxy: httpx.AsyncHTTPTransport(proxy=proxy)),
        )

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
        from gatecell.batch import arun as arun_map

        self.base_url  # noqa: B018  (where: decided before the rows are)
        return await arun_map(
            self,
            self.journal.gateway,
            self._routes,
            template,
            data,
            progress=progress,
            on_row=on_row,
            **options,
        )

    async def resume(self, chain: str, **options: Any) -> Any:
        """`Gateway.resume`, awaited."""
        plan = self._resumption(chain, options)
        await plan.pending.arun()
        method = getattr(self, plan.method)
        return plan.finished(await method(**plan.arguments(), **options))

    async def aclose(self) -> None:
        if self._owns_http:
            await self._http.aclose()
