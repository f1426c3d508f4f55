"""One call, from its `Call` to a parsed result: the program every endpoint method runs.

`Calls` holds what every request of a client shares (where, with which key, its `Options`)
and turns a `Call` into a program (sans-IO, see `exchange`): built into an `http.Request`,
sent with retries and redirects, parsed by the endpoint's parser into the result type
(`ChatCompletion`, `Reply`, a stream...). Around each call stand the client's `Hooks`: asked
first (they may hold the answer already, as a cache does), told last how it ended (an
`Outcome`; a stream's once it ends). The wire's own hooks do nothing; the façade
(`gatecell.gateway`) fills them in with the log and the cache, so nothing here knows SQLite.

Who runs the program is the subclass's business (``_run``): `gatecell.gateway` runs it with
a driver; `Programs` hands it back unrun, for a driver of the caller's own (the batch).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from gatecell._version import __version__
from gatecell.wire.apis import spec
from gatecell.wire.apis._decoders import BodyDecoder, ChatDecoder, Decoder, ResponsesDecoder
from gatecell.wire.apis.conversation import to_responses
from gatecell.wire.apis.jobs import JobPaths, job_state, submitted_id, wait_program
from gatecell.wire.apis.routing import PatternLike, Router, to_chat
from gatecell.wire.apis.spec import ChatCompletion, usage_of
from gatecell.wire.apis.streams import AsyncChatStream, AsyncTextStream, ChatStream, Stream, TextStream
from gatecell.wire.transport.errors import APIError, GatecellError, body_error, connection_error, json_body
from gatecell.wire.transport.exchange import Call, Pending, Program, Read, RetryPolicy, Wait, exchange, logger
from gatecell.wire.transport.http import Headers, Request, Response, TransportError, same_origin
from gatecell.wire.transport.results import (
    Audio,
    ImageResult,
    Job,
    Media,
    ModelList,
    Reply,
    ResponseMeta,
    images_of,
)
from gatecell.wire.transport.settings import Settings, env_flag, env_number, split_query
from gatecell.wire.typed.rounds import rounds
from gatecell.wire.typed.structured import Support
from gatecell.wire.typed.typed_calls import Typed, TypedAnswer, read_answer
from gatecell.wire.util.secret import Secret, protect_logs, redact_data

__all__ = [
    "Calls",
    "Options",
    "Hooks",
    "Outcome",
    "Parse",
    "JSON_CAP",
    "MEDIA_CAP",
    "USER_AGENT",
    "EMPTY_REPLY",
]

# Default caps on a response body (``max_response_bytes`` unset). A JSON answer or a stream
# of text past 64 MiB is no reply a model gives, but it is what a hostile or broken gateway
# can send to exhaust the memory (the whole body is held); media (speech, images and videos
# fetched from a URL) is legitimately larger, so it gets 512 MiB, still far below a
# notebook machine's memory.
JSON_CAP = 64 * 2**20
MEDIA_CAP = 512 * 2**20

Parse = Callable[[Call, Response, ResponseMeta], Any]


USER_AGENT = f"gatecell/{__version__}"
# A batch's row whose answer has no text (and no typed value): its error, and what its log entry
# says, so the log never answers with it.
EMPTY_REPLY = "empty reply: no text came back (not kept as an answer: a new run sends this row again)"


@dataclass(frozen=True)
class Options:
    """How a client sends, whatever the gateway: timeouts (seconds), retries, caps.

    **Parameters** (each unset one from its environment variable, see the README):

    * ``timeout``: each read or write; ``connect_timeout``: opening a connection;
      ``request_timeout``: the whole of a non-streaming request (each attempt);
      ``stream_idle_timeout``: the longest silence of a stream between events.
    * ``max_retries``, ``backoff``, ``retry_after_cap``: see `RetryPolicy`.
    * ``max_response_bytes``: one cap for every body (else `JSON_CAP` / `MEDIA_CAP`).
    * ``stream_usage``: chat streams ask for their usage (``stream_options``, which SPEC
      does not show); None: only where the gateway is known to take it (``usage_known``).
    * ``job_paths``, ``job_interval``: where and how often jobs are polled.
    """

    timeout: float = 60.0
    connect_timeout: float = 5.0
    request_timeout: float = 600.0
    stream_idle_timeout: float = 60.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    max_response_bytes: int | None = None
    stream_usage: bool | None = None
    job_paths: JobPaths = field(default_factory=JobPaths)
    job_interval: float = 2.0

    @classmethod
    def resolve(
        cls,
        *,
        timeout: float | None = None,
        connect_timeout: float | None = None,
        request_timeout: float | None = None,
        stream_idle_timeout: float | None = None,
        max_retries: int | None = None,
        backoff: float = 0.5,
        retry_after_cap: float = 60.0,
        max_response_bytes: int | None = None,
        stream_usage: bool | None = None,
        job_paths: JobPaths | None = None,
        job_interval: float = 2.0,
    ) -> Options:
        """The options from these arguments, else the environment, else the defaults."""
        if stream_usage is None and os.environ.get("GATECELL_STREAM_USAGE", "").strip():
            stream_usage = env_flag(None, "GATECELL_STREAM_USAGE")
        retries = env_number(max_retries, "GATECELL_MAX_RETRIES", 2)
        return cls(
            timeout=env_number(timeout, "GATECELL_TIMEOUT", 60.0),
            connect_timeout=env_number(connect_timeout, "GATECELL_CONNECT_TIMEOUT", 5.0),
            request_timeout=env_number(request_timeout, "GATECELL_REQUEST_TIMEOUT", 600.0),
            stream_idle_timeout=env_number(stream_idle_timeout, "GATECELL_STREAM_IDLE_TIMEOUT", 60.0),
            retry=RetryPolicy(max_retries=retries, base=backoff, retry_after_cap=retry_after_cap),
            max_response_bytes=env_number(max_response_bytes, "GATECELL_MAX_RESPONSE_BYTES", 0) or None,
            stream_usage=stream_usage,
            job_paths=job_paths or JobPaths(),
            job_interval=job_interval,
        )

    def with_retries(self, max_retries: int) -> Options:
        return dataclasses.replace(self, retry=dataclasses.replace(self.retry, max_retries=max_retries))

    @property
    def json_cap(self) -> int:
        return self.max_response_bytes or JSON_CAP

    @property
    def media_cap(self) -> int:
        return self.max_response_bytes or MEDIA_CAP


@dataclass(frozen=True)
class Outcome:
    """How one call ended: what was sent, and what came of it.

    ``result`` is what the endpoint returned (a `ChatCompletion`, a `Reply`, a `Job`...);
    for a stream it is the stream itself, reported when it ends, with all its text, and
    ``partial`` tells a stream cut by an error or closed by the caller before its end.
    ``error`` is the `GatecellError` the call raised; ``meta`` is None when no answer came.
    ``body`` is the raw body of a whole (not streamed) answer; ``note`` is what the hooks
    said when the call started (theirs to read); ``schema`` what a typed answer had to be
    (a `structured.Schema`; the value read is the result's ``.parsed``).
    """

    call: Call
    result: Any = None
    error: GatecellError | None = None
    meta: ResponseMeta | None = None
    partial: bool = False
    body: bytes | None = None
    note: Any = None
    schema: Any = None


class Hooks:
    """What a client does around each call. These do nothing; subclass to log or cache.

    ``started`` is asked as a call begins (on the caller's thread, before anything is sent):
    it returns a note (handed back with the `Outcome`) and, to answer the call without
    sending it, a `Response` with its `ResponseMeta`, which the endpoint's own parser reads.
    ``ended`` hears how the call ended, once: at once, or for a stream when it ends; what it
    returns, a `Pending` (the log's commit of the outcome), the call waits for before it
    returns (a stream before its iteration ends), so what a caller was shown is recorded.
    ``job_kind`` lets a job be polled by its id alone; ``kept_vectors`` and ``keep_vectors``
    are ``embed``'s cache of vectors (each text embedded once, ever). ``wants_model_info`` is asked once per
    client whose gateway is LiteLLM (it names itself in ``x-litellm-*`` headers): if so, its
    ``GET /model/info`` body (None if that failed) goes to ``model_info`` (the log keeps the
    prices there, for the answers that do not say what they cost).
    """

    def started(self, call: Call) -> tuple[Any, tuple[Response, ResponseMeta] | None]:
        return None, None

    def ended(self, outcome: Outcome) -> Pending | None:
        return None

    def wants_model_info(self) -> bool:
        return False

    def model_info(self, body: Any) -> None:
        pass

    def job_kind(self, job_id: str) -> str | None:
        """The kind of the job with this id, when the hooks know it (the log does)."""
        return None

    def for_batch(self, cache: bool) -> Hooks:
        """These hooks as a batch's rows use them (``cache``: rows are answered from the log):
        see `gatecell.journal.BatchJournal`. These do nothing either way."""
        return self

    def settled(self) -> Pending | None:
        """The commit of everything these hooks logged so far, to wait for (None: nothing)."""
        return None

    def unwaited(self) -> Pending | None:
        """The commit of what this task's calls logged without waiting for it (a batch's row,
        which its engine waits for once the row is counted), taken; None: nothing."""
        return None

    def for_embeddings(self) -> Hooks:
        """These hooks as ``embed``'s requests use them: logged like a batch's rows, never
        waited for one by one (`settled` is, at the end); see `gatecell.journal.EmbedJournal`."""
        return self

    def kept_vectors(self, model: str, dimensions: int | None, hashes: list[bytes]) -> dict[bytes, bytes]:
        """The vectors kept for the texts of these sha256 ``hashes`` (float32 bytes, by hash):
        those the hooks hold (none here)."""
        return {}

    def keep_vectors(self, model: str, dimensions: int | None, hashes: list[bytes], vectors: Any) -> None:
        """Keep one answer's ``vectors`` (a float32 matrix, one row per hash) for later calls."""


_NO_HOOKS = Hooks()


class Calls:
    """What every call of a client shares, and the program of one call (see the module).

    **Parameters:** ``base_url`` (the root address, see `settings.root_url`) and ``api_key``;
    or, with ``base_url`` None, ``locate``: called on the first request for the `Settings`
    to use (the façade starts the local gateway there, not when a client is made).
    ``options``: `Options`; ``router``: which models go to /v1/responses, ``support``:
    which take a schema natively (`structured.Support`; both shared by the clients made
    from this one); ``hooks``: see `Hooks`.
    """

    _chat_stream: type[ChatStream] | type[AsyncChatStream]
    _text_stream: type[TextStream] | type[AsyncTextStream]

    def __init__(
        self,
        base_url: str | None,
        api_key: str | Secret | None,
        *,
        options: Options | None = None,
        locate: Callable[[], Settings] | None = None,
        router: Router | None = None,
        reasoning_patterns: list[PatternLike] | None = None,
        hooks: Hooks | None = None,
        support: Support | None = None,
    ) -> None:
        self.options = options or Options.resolve()
        self.router = router or Router(reasoning_patterns)
        self.support = support or Support()
        self.hooks = hooks or _NO_HOOKS
        self._base_url: str | None = None
        self._query = ""
        self._locate = locate
        if base_url is not None:
            self._base_url, self._query = split_query(base_url)
            self._locate = None
        self.api_key = api_key
        self.usage_known = False  # the gateway is known to report usage on streams when asked
        self.litellm = False  # the gateway named itself LiteLLM (see `_seen`)
        self._model_info_asked = False

    # -- where, and with which key -------------------------------------------------------

    @property
    def base_url(self) -> str:
        """The gateway's root address; where ``locate`` decides, decided now."""
        if self._base_url is None:
            self._settle()
        assert self._base_url is not None
        return self._base_url

    @property
    def located(self) -> bool:
        """Whether the gateway's address is known yet (see ``locate``)."""
        return self._base_url is not None

    def _settle(self) -> None:
        locate = self._locate
        if locate is None:
            from gatecell.wire.transport.errors import ConfigError

            raise ConfigError("no gateway address: set GATECELL_BASE_URL (or base_url=)")
        settings = locate()
        assert settings.base_url is not None
        self._locate = None
        self._base_url, self._query = split_query(settings.base_url)
        self.api_key = settings.api_key

    @property
    def api_key(self) -> Secret | None:
        return self._api_key

    @api_key.setter
    def api_key(self, value: str | Secret | None) -> None:
        """The headers of each kind of credential are made here, once, not per request. The
        key is masked in every log record of httpx, httpcore and gatecell from now on."""
        self._api_key = Secret(value) if isinstance(value, str) and value else value or None
        protect_logs(self._api_key)
        plain = {
            "user-agent": USER_AGENT,
            "content-type": "application/json",
            "accept-encoding": "identity",  # see `exchange.compressed`
        }
        key = self._api_key.reveal() if self._api_key else None
        self._headers = {
            "none": Headers(plain),
            "bearer": Headers({**plain, "authorization": f"Bearer {key}"} if key else plain),
            "goog": Headers({**plain, "x-goog-api-key": key} if key else plain),
        }
        self._stream_headers = {
            kind: headers.with_fields(accept="text/event-stream") for kind, headers in self._headers.items()
        }

    def _described(self) -> str:
        where = (
            repr(self._base_url) if self._base_url is not None else "<the local gateway, on first request>"
        )
        return f"base_url={where}, api_key={self._api_key!r}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._described()})"

    def _own(self, url: str) -> bool:
        """Whether ``url`` is on the gateway's own origin (relative, or the same origin)."""
        try:
            absolute = bool(urlsplit(url).scheme)
        except ValueError:
            return False  # and the request fails, in its program, as one line
        return not absolute or same_origin(self.base_url, url)

    def _run(self, program: Program[Any]) -> Any:
        """The result of ``program``; on an async client, a coroutine giving it."""
        raise NotImplementedError

    # -- one call (sans-IO; see exchange) ---------------------------------------------

    def _build(self, call: Call) -> Request:
        options = self.options
        if call.path[:1] == "/":
            url = self.base_url + call.path
            if self._query:  # a query of the base address (``?api-version=...``) goes on every request
                url += ("&" if "?" in call.path else "?") + self._query
        else:
            url = call.path  # absolute: a media URL
        if call.stream:
            return Request(
                call.method,
                url,
                self._stream_headers[call.auth],
                call.body or b"",
                stream=True,
                read_timeout=options.stream_idle_timeout,
                max_bytes=options.json_cap,
            )
        return Request(
            call.method,
            url,
            self._headers[call.auth],
            call.body or b"",
            max_bytes=options.media_cap if call.media else options.json_cap,
            seconds=options.request_timeout,
        )

    def _call(self, call: Call, parse: Parse, schema: Any = None) -> Program[Any]:
        """One call, start to end: send it (with retries and redirects), parse the answer
        (read as a typed answer of ``schema``, when given), and tell the hooks how it ended;
        a stream tells them itself when it ends. When the hooks have the answer already, it
        is parsed by the same parser and nothing is sent."""
        note, answered = self.hooks.started(call)
        failure: GatecellError | None = None
        try:
            if answered is not None:
                response, meta = answered
            else:
                response, meta = yield from exchange(self._build, call, self.options.retry, self.api_key)
                if not self.litellm:
                    self._seen(response.headers)
                if call.stream and not _is_sse(response) and not response.is_closed:
                    yield Read(response)  # a whole body where a stream was asked: parsed as one
            result = parse(call, response, meta)
            if schema is not None:
                read_answer(result, schema)  # before the hooks hear of it: the log keeps the value
        except TransportError as exc:  # reading an unexpected whole body broke
            failure = connection_error(exc, call.method, call.path)
        except GatecellError as error:
            failure = error
        if failure is not None:
            pending = self._ended(Outcome(call, error=failure, note=note, schema=schema))
            if pending is not None:
                yield Wait(pending)
            raise failure
        if self.litellm and not self._model_info_asked:
            self._model_info_asked = True
            if self.hooks.wants_model_info():
                self.hooks.model_info((yield from self._model_metadata()))
        if isinstance(result, Stream):
            result.on_end = lambda stream, error: self._ended(
                Outcome(call, stream, error, meta, not stream.complete, note=note)
            )
        else:
            body = None if call.stream or _is_sse(response) else response.content
            meta.body = body
            pending = self._ended(Outcome(call, result, meta=meta, body=body, note=note, schema=schema))
            if pending is not None:  # what the caller is shown is in the log first
                yield Wait(pending)
        return result

    def _seen(self, headers: Headers) -> None:
        """LiteLLM names itself in ``x-litellm-*`` headers: it takes ``stream_options``, so
        streams ask for their usage from now on (its last usage chunk says what it cost)."""
        if any(name.startswith("x-litellm-") for name in headers):
            self.litellm = self.usage_known = True

    def _ended(self, outcome: Outcome) -> Pending | None:
        """Where every call's outcome arrives: the hooks hear of it (they must never cost
        the caller its answer), and it is one DEBUG line. What the hooks return (the commit
        of the log entry) is for the caller to wait for."""
        pending = None
        try:
            pending = self.hooks.ended(outcome)
        except Exception as exc:
            logger.warning("gatecell: an exchange was not logged (%s: %s)", type(exc).__name__, exc)
        if not logger.isEnabledFor(logging.DEBUG):
            return pending
        call, meta, error = outcome.call, outcome.meta, outcome.error
        line = f"{call.method} {call.path} model={call.model} -> "
        if meta is not None:
            line += f"{meta.status} in {meta.latency:.3f}s (request id {meta.request_id})"
            if meta.cached:
                line += ", from the cache"
            if isinstance(outcome.result, Stream):
                line += ", stream " + ("cut" if error else "closed early" if outcome.partial else "complete")
        if error is not None:
            line += f"{': ' if meta else ''}{error}"
        logger.debug("%s", line)
        return pending

    # -- answers ------------------------------------------------------------------------

    def _json(self, response: Response, call: Call) -> Any:
        """The body as JSON (or text), refusing a 200 that carries an error object."""
        body = json_body(response.content)
        error = body_error(response, body, self.api_key, call.method, call.path)
        if error is not None:
            raise error
        return body

    def _chat(self, request: spec.ChatRequest, schema: Any) -> Program[Any]:
        if not self.router.wants_responses(request.model):
            try:
                return (yield from self._chat_completions(request, schema))
            except APIError as error:
                if not self.router.is_refusal(error):
                    raise
                self.router.remember(request.model)
                logger.info(
                    "model %s is served by /v1/responses only (%s); retrying there",
                    request.model,
                    error.message,
                )
        return (yield from self._chat_responses(request, schema))

    def _chat_completions(self, request: spec.ChatRequest, schema: Any) -> Program[Any]:
        call = Call("POST", "/v1/chat/completions", request_body(request), request.stream, request.model)
        return self._call(
            call, self._opener(ChatDecoder, self._chat_stream) if request.stream else self._completion, schema
        )

    def _asks_usage(self) -> bool:
        asked = self.options.stream_usage
        return self.usage_known if asked is None else asked

    def _completion(self, call: Call, response: Response, meta: ResponseMeta) -> ChatCompletion:
        try:
            completion = ChatCompletion.model_validate_json(response.content)
        except ValueError:
            if _is_sse(response):  # streamed although not asked: parse by Content-Type
                return self._collect(response, meta, call, ChatDecoder)
            completion = None
        if completion is None or not completion.choices:
            body = self._json(response, call)
            if completion is None:
                raise APIError(
                    f"not a chat completion: {str(body)[:200]}",
                    status=response.status,
                    method="POST",
                    path=call.path,
                    request_id=meta.request_id,
                )
        meta.usage = completion.usage
        completion._meta = meta
        return completion

    def _chat_responses(self, request: spec.ChatRequest, schema: Any) -> Program[Any]:
        body = to_responses(request.model_dump(exclude_none=True))
        call = Call("POST", "/v1/responses", json.dumps(body).encode(), request.stream, request.model)
        parse = (
            self._opener(ResponsesDecoder, self._chat_stream)
            if request.stream
            else self._responses_completion
        )
        return self._call(call, parse, schema)

    def _responses_completion(self, call: Call, response: Response, meta: ResponseMeta) -> ChatCompletion:
        if _is_sse(response):
            return self._collect(response, meta, call, ResponsesDecoder)
        completion = ChatCompletion.model_validate(to_chat(self._json(response, call), call.model or ""))
        meta.usage = completion.usage
        completion._meta = meta
        return completion

    def _collect(
        self, response: Response, meta: ResponseMeta, call: Call, decoder_cls: type[Decoder]
    ) -> ChatCompletion:
        """A whole SSE body (already read) as one `ChatCompletion`."""
        decoder = decoder_cls(None, call.path, self.api_key)
        decoder.feed(response.content)
        decoder.finish()
        return ChatStream(response, decoder, meta).completion()

    def _opener(self, decoder_cls: type[Decoder], stream_cls: type[Stream]) -> Parse:
        """How to open a stream: parsed by what Content-Type says rather than by what was
        asked (a plain body where a stream was asked is one fragment)."""

        def parse(call: Call, response: Response, meta: ResponseMeta) -> Stream:
            if _is_sse(response):
                # One event is at most half a legitimate stream (responses repeat the whole
                # reply in their last event), so an endless line fails at half the cap.
                max_event = self.options.json_cap // 2
                decoder = decoder_cls(self.options.stream_idle_timeout, call.path, self.api_key, max_event)
            else:
                decoder = BodyDecoder(self._json(response, call), path=call.path)
            return stream_cls(response, decoder, meta)

        return parse

    # -- typed answers ----------------------------------------------------------------------

    def _typed(
        self,
        api: str,
        model: str,
        data: dict[str, Any],
        typed: Typed,
        validate: Callable[[dict[str, Any]], Any],
        send: Callable[[Any, Any], Program[Any]],
    ) -> Program[Any]:
        """The rounds of a typed call (`typed_calls.TypedAnswer`) with this client's support."""
        policy = TypedAnswer(api, model, data, typed, self.support, self._model_metadata, validate)
        return rounds(policy, lambda body: send(validate(body), typed.schema))

    def _model_metadata(self) -> Program[Any]:
        """LiteLLM's ``GET /model/info`` body, asked once, without retries and unlogged (it
        is no exchange of the user's), redacted as the model list is (its names are kept);
        None for any failure: a gateway without it teaches nothing."""
        call = Call("GET", "/model/info", logged=False)
        try:
            response, _ = yield from exchange(self._build, call, RetryPolicy(max_retries=0), self.api_key)
        except GatecellError:
            return None
        return redact_data(json_body(response.content))

    def _native(self, call: Call, decoder_cls: type[Decoder], schema: Any = None) -> Program[Any]:
        parse = self._opener(decoder_cls, self._text_stream) if call.stream else self._reply
        return self._call(call, parse, schema)

    def _reply(self, call: Call, response: Response, meta: ResponseMeta) -> Reply:
        reply = Reply(self._json(response, call), meta)
        meta.usage = usage_of(reply.usage)
        return reply

    def _image(self, call: Call, response: Response, meta: ResponseMeta) -> ImageResult:
        body = self._json(response, call)
        return ImageResult(body, images_of(body, self._media_for), meta)

    def _speech(self, requested: str | None) -> Parse:
        def parse(call: Call, response: Response, meta: ResponseMeta) -> Audio:
            mime = response.headers.get("content-type")
            if mime and mime.startswith("application/json"):
                self._json(response, call)  # a 200 carrying an error raises here
            return Audio(response.content, mime, meta, requested)

        return parse

    def _models(self, call: Call, response: Response, meta: ResponseMeta) -> ModelList:
        models = ModelList.from_body(self._json(response, call), meta)
        self.router.learn(models)
        return models

    # -- jobs -----------------------------------------------------------------------------

    def _submit(
        self, kind: str, request: Any, model: str | None, waiting: tuple[bool, Any, float, float | None]
    ) -> Program[Job]:
        def parse(call: Call, response: Response, meta: ResponseMeta) -> Job:
            body = self._json(response, call)
            return self._job_from(kind, submitted_id(kind, body), body, meta)

        job = yield from self._call(
            Call("POST", self.options.job_paths.submit(kind), request_body(request), model=model), parse
        )
        wait, on_progress, timeout, interval = waiting
        if wait:
            job = yield from wait_program(
                self._poll, job, on_progress, timeout, interval or self.options.job_interval
            )
        return job

    def _poll(self, job: Job) -> Program[Job]:
        def parse(call: Call, response: Response, meta: ResponseMeta) -> Job:
            return self._job_from(job.kind, job.id, self._json(response, call), meta)

        path = self.options.job_paths.fetch(job.kind, job.id)
        return self._call(Call("GET", path, logged=False), parse)

    def _job_from(self, kind: str, job_id: str, body: Any, meta: ResponseMeta) -> Job:
        job = job_state(kind, job_id, body, self.options.job_paths)
        job.meta = meta
        job._media_for = self._media_for
        return job

    def _media_for(self, url: str, mime: str | None) -> Media:
        """Media fetched on first use, with the key only on the gateway's own host."""
        return Media(url=url, mime=mime, load=lambda: self._run(self._fetch(url)))

    def _fetch(self, url: str) -> Program[tuple[bytes, str | None]]:
        call = Call("GET", url, auth="bearer" if self._own(url) else "none", media=True, logged=False)
        return self._call(
            call, lambda call, response, meta: (response.content, response.headers.get("content-type"))
        )


def request_body(request: Any) -> bytes:
    """A validated request model as the JSON bytes sent (its unset fields left out)."""
    return request.model_dump_json(exclude_none=True).encode()


def _is_sse(response: Response) -> bool:
    return response.headers.get("content-type", "").startswith("text/event-stream")
