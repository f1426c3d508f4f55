"""`Gateway` and `AsyncGateway`: one method per endpoint of SPEC section 4.

Every endpoint is written once, in `_Endpoints`: it validates its arguments (SPEC 2 and 8,
before anything is sent), builds a sans-IO *program* (see `exchange`) and hands it to
``self._run``. `Gateway` runs it with the sync driver and returns the result;
`AsyncGateway` returns the coroutine of the async driver (see `drivers`). So the two
clients share every decision and differ only in their driver and their stream classes.
`_Endpoints` is generic in what its methods return, which is how the types stay true for
both: `Gateway.chat` returns a `ChatCompletion`, `AsyncGateway.chat` a coroutine of one.

Every call ends in `_Endpoints._record` with its `Outcome`, streams included (when they end);
that is where the log hooks in (see `journal`), and `_Endpoints._call` is where the cache
answers instead of the gateway.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar, overload
from urllib.parse import quote

import httpx

from gatecell import __version__

from . import schemas
from .context import CallContext, current
from .conversation import for_api, to_responses
from .decoders import (
    BodyDecoder,
    ChatDecoder,
    Decoder,
    GenerateContentDecoder,
    MessagesDecoder,
    ResponsesDecoder,
)
from .drivers import arun, run
from .error_mapping import body_error, connection_error, json_body
from .errors import APIError, GatecellError, InvalidRequest
from .exchange import Call, Outcome, Program, Read, exchange, logger
from .jobs import JobPaths, job_state, submitted_id, wait_program
from .limits import LIMITS, LimitedTransport, Limits
from .redirects import same_origin
from .results import Audio, ImageResult, Job, Media, ModelList, Reply, ResponseMeta, images_of
from .retry import RetryPolicy
from .routing import PatternLike, Router, to_chat
from .schemas import ChatCompletion, usage_of
from .secret import Secret, protect_logs
from .settings import env_flag, env_number, resolve
from .streams import (
    AsyncChatStream,
    AsyncClosing,
    AsyncTextStream,
    ChatStream,
    Closing,
    TextStream,
    _Stream,
)

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from gatecell.batch import Batch, MapOptions

    from .journal import Journal

__all__ = [
    "Gateway",
    "AsyncGateway",
    "ChatStream",
    "AsyncChatStream",
    "TextStream",
    "AsyncTextStream",
    "JobPaths",
    "Outcome",
    "logger",
    "JSON_CAP",
    "MEDIA_CAP",
]

_USER_AGENT = f"gatecell/{__version__}"
_JSON = ("application/json",)
_SSE = {"accept": "text/event-stream"}

# Default caps on a response body (``max_response_bytes`` unset). A JSON answer or a stream
# of text past 64 MiB is no reply a model gives, but it is what a hostile or broken gateway
# can send to exhaust the memory (the whole body is held); media (speech, images and videos
# fetched from a URL) is legitimately larger, so it gets 512 MiB, still far below a
# notebook machine's memory.
JSON_CAP = 64 * 2**20
MEDIA_CAP = 512 * 2**20

Messages = list[dict[str, Any]]
Parse = Callable[[Call, httpx.Response, ResponseMeta], Any]
T = TypeVar("T")
# What the endpoints return: the result itself on `Gateway`, a coroutine of it on `AsyncGateway`.
_Completion = TypeVar("_Completion")
_ChatStream = TypeVar("_ChatStream")
_Reply = TypeVar("_Reply")
_TextStream = TypeVar("_TextStream")
_Image = TypeVar("_Image")
_Audio = TypeVar("_Audio")
_Models = TypeVar("_Models")
_Job = TypeVar("_Job")


def _dump(request: Any) -> bytes:
    return request.model_dump_json(exclude_none=True).encode()


def _is_sse(response: httpx.Response) -> bool:
    return response.headers.get("content-type", "").startswith("text/event-stream")


class _Endpoints(Generic[_Completion, _ChatStream, _Reply, _TextStream, _Image, _Audio, _Models, _Job]):
    """The endpoints, written once for both clients. Subclasses provide the driver
    (`_run`), the HTTP client (`_connect`) and the stream classes."""

    _chat_stream: type[ChatStream] | type[AsyncChatStream]
    _text_stream: type[TextStream] | type[AsyncTextStream]
    _http: httpx.Client | httpx.AsyncClient

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
    ) -> None:
        # Which gateway: the arguments, else the environment (settings.resolve), else the
        # policy of gatecell.connect (the local gateway, with one notice per process).
        settings = resolve(base_url, api_key)
        if not settings.base_url:
            from gatecell.connect import choose

            settings = choose()
        assert settings.base_url is not None  # the policy always finds one

        self.base_url: str = settings.base_url
        # Unset options come from GATECELL_TIMEOUT, GATECELL_CONNECT_TIMEOUT,
        # GATECELL_STREAM_IDLE_TIMEOUT, GATECELL_REQUEST_TIMEOUT, GATECELL_MAX_RETRIES,
        # GATECELL_MAX_RESPONSE_BYTES and GATECELL_STREAM_USAGE. `timeout` bounds each read
        # or write; `request_timeout` the whole of a non-streaming request (each attempt);
        # streams have the idle timeout instead.
        timeout = env_number(timeout, "GATECELL_TIMEOUT", 60.0)
        connect_timeout = env_number(connect_timeout, "GATECELL_CONNECT_TIMEOUT", 5.0)
        self.stream_idle_timeout = env_number(stream_idle_timeout, "GATECELL_STREAM_IDLE_TIMEOUT", 60.0)
        self.request_timeout = env_number(request_timeout, "GATECELL_REQUEST_TIMEOUT", 600.0)
        retries = env_number(max_retries, "GATECELL_MAX_RETRIES", 2)
        # One cap for every body when set (0: unset); else JSON_CAP, and MEDIA_CAP for media.
        self.max_response_bytes = env_number(max_response_bytes, "GATECELL_MAX_RESPONSE_BYTES", 0) or None
        self._json_cap = self.max_response_bytes or JSON_CAP
        self._media_cap = self.max_response_bytes or MEDIA_CAP
        # Usage on chat streams: asked for only on request, since SPEC does not show it.
        self.stream_usage = env_flag(stream_usage, "GATECELL_STREAM_USAGE")
        self.retry = RetryPolicy(max_retries=retries, base=backoff, retry_after_cap=retry_after_cap)
        self.router = Router(reasoning_patterns)
        self.job_paths = job_paths or JobPaths()
        self.job_interval = job_interval
        self._stream_timeout = httpx.Timeout(timeout, connect=connect_timeout, read=self.stream_idle_timeout)
        self._origin = httpx.URL(self.base_url)
        self._http = self._connect(
            base_url=self.base_url,
            timeout=httpx.Timeout(timeout, connect=connect_timeout),
            headers={
                "user-agent": _USER_AGENT,
                "content-type": "application/json",
                "accept-encoding": "identity",  # see limits: a compressed body escapes the cap
            },
        )
        self.api_key = settings.api_key
        # The store (GATECELL_HOME/gatecell.db): log every exchange (GATECELL_LOG, on by
        # default), with the bytes of media replies (GATECELL_LOG_MEDIA), and answer requests
        # identical to logged ones from it (GATECELL_CACHE). Each can be changed at any time.
        self.log = env_flag(log, "GATECELL_LOG", True)
        self.cache = env_flag(cache, "GATECELL_CACHE", False)
        self.log_media = env_flag(log_media, "GATECELL_LOG_MEDIA", False)
        self._journal: Journal | None = None

    def _connect(self, **options: Any) -> httpx.Client | httpx.AsyncClient:
        raise NotImplementedError

    def _run(self, program: Program[Any]) -> Any:
        """The result of ``program``; on `AsyncGateway`, a coroutine giving it."""
        raise NotImplementedError

    @property
    def api_key(self) -> Secret | None:
        return self._api_key

    @api_key.setter
    def api_key(self, value: str | Secret | None) -> None:
        """The bearer header lives in the connection pool's defaults (built once, not per
        request; httpx shows it as ``[secure]``); requests that must not carry it drop it.
        The key is masked in every log record of httpx, httpcore and gatecell from now on."""
        self._api_key = Secret(value) if isinstance(value, str) and value else value or None
        protect_logs(self._api_key)
        if self._api_key:
            self._http.headers["authorization"] = "Bearer " + self._api_key.reveal()
        else:
            self._http.headers.pop("authorization", None)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base_url={self.base_url!r}, api_key={self.api_key!r})"

    # -- conversation -----------------------------------------------------------------
    #
    # Keyword arguments beyond a method's parameters are body fields, and must be ones
    # the endpoint is known to take (schemas: ``passthrough``); any other name is refused
    # before sending, naming the closest known one. Fields gatecell does not know go,
    # deliberately and unchecked, in ``extra_body``.

    @overload
    def chat(
        self,
        model: str,
        messages: Messages,
        temperature: float | None = None,
        top_p: float | None = None,
        max_tokens: int | None = None,
        stream: Literal[False] = False,
        *,
        extra_body: Mapping[str, Any] | None = None,
        **fields: Any,
    ) -> _Completion: ...
    @overload
    def chat(
        self,
        model: str,
        messages: Messages,
        temperature: float | None = None,
        top_p: float | None = None,
        max_tokens: int | None = None,
        *,
        stream: Literal[True],
        extra_body: Mapping[str, Any] | None = None,
        **fields: Any,
    ) -> _ChatStream: ...
    @overload
    def chat(
        self,
        model: str,
        messages: Messages,
        temperature: float | None = None,
        top_p: float | None = None,
        max_tokens: int | None = None,
        stream: bool = False,
        *,
        extra_body: Mapping[str, Any] | None = None,
        **fields: Any,
    ) -> _Completion | _ChatStream: ...
    def chat(
        self,
        model: str,
        messages: Messages,
        temperature: float | None = None,
        top_p: float | None = None,
        max_tokens: int | None = None,
        stream: bool = False,
        *,
        extra_body: Mapping[str, Any] | None = None,
        **fields: Any,
    ) -> Any:
        """Chat completion (SPEC 2.1-2.4): a `ChatCompletion`, or a `ChatStream` of text.

        A reasoning model goes to /v1/responses instead (SPEC 4 note 3); the answer is still
        a `ChatCompletion` (or a stream of its text). With ``stream_usage`` a stream asks for
        its token usage. On `AsyncGateway`, await it.
        """
        data: dict[str, Any] = {
            "model": model,
            "messages": messages,
            "temperature": temperature,
            "top_p": top_p,
            "max_tokens": max_tokens,
            "stream": stream,
        }
        if stream and self.stream_usage:
            data["stream_options"] = {"include_usage": True}
        request = self._request(schemas.ChatRequest, self.chat, data, fields, extra_body)
        return self._run(self._chat(request))

    @overload
    def messages(
        self,
        model: str,
        messages: Messages,
        max_tokens: int = 1024,
        stream: Literal[False] = False,
        *,
        extra_body: Mapping[str, Any] | None = None,
        **fields: Any,
    ) -> _Reply: ...
    @overload
    def messages(
        self,
        model: str,
        messages: Messages,
        max_tokens: int = 1024,
        *,
        stream: Literal[True],
        extra_body: Mapping[str, Any] | None = None,
        **fields: Any,
    ) -> _TextStream: ...
    @overload
    def messages(
        self,
        model: str,
        messages: Messages,
        max_tokens: int = 1024,
        stream: bool = False,
        *,
        extra_body: Mapping[str, Any] | None = None,
        **fields: Any,
    ) -> _Reply | _TextStream: ...
    def messages(
        self,
        model: str,
        messages: Messages,
        max_tokens: int = 1024,
        stream: bool = False,
        *,
        extra_body: Mapping[str, Any] | None = None,
        **fields: Any,
    ) -> Any:
        """Native messages endpoint: a `Reply` (``.text`` recognised), or a `TextStream`."""
        data = {"model": model, "messages": messages, "max_tokens": max_tokens, "stream": stream}
        request = self._request(schemas.MessagesRequest, self.messages, data, fields, extra_body)
        return self._run(
            self._native(Call("POST", "/v1/messages", _dump(request), stream, model), MessagesDecoder)
        )

    @overload
    def generate_content(
        self,
        model: str,
        contents: str | Messages,
        stream: Literal[False] = False,
        *,
        extra_body: Mapping[str, Any] | None = None,
        **fields: Any,
    ) -> _Reply: ...
    @overload
    def generate_content(
        self,
        model: str,
        contents: str | Messages,
        *,
        stream: Literal[True],
        extra_body: Mapping[str, Any] | None = None,
        **fields: Any,
    ) -> _TextStream: ...
    @overload
    def generate_content(
        self,
        model: str,
        contents: str | Messages,
        stream: bool = False,
        *,
        extra_body: Mapping[str, Any] | None = None,
        **fields: Any,
    ) -> _Reply | _TextStream: ...
    def generate_content(
        self,
        model: str,
        contents: str | Messages,
        stream: bool = False,
        *,
        extra_body: Mapping[str, Any] | None = None,
        **fields: Any,
    ) -> Any:
        """Native generate-content; ``contents`` may be a plain prompt. The key travels in
        ``x-goog-api-key`` here (SPEC 5), and the model in the path."""
        if not isinstance(model, str) or not model.strip():
            raise InvalidRequest("model", "must not be empty")
        if isinstance(contents, str):
            contents = [{"role": "user", "parts": [{"text": contents}]}]
        data = {"contents": contents}
        request = self._request(
            schemas.GenerateContentRequest, self.generate_content, data, fields, extra_body
        )
        name = quote(model.removeprefix("models/"), safe="-._~@")
        path = (
            f"/v1beta/models/{name}:streamGenerateContent?alt=sse"
            if stream
            else f"/v1beta/models/{name}:generateContent"
        )
        call = Call("POST", path, _dump(request), stream, model, auth="goog")
        return self._run(self._native(call, GenerateContentDecoder))

    @overload
    def responses(
        self,
        model: str,
        input: str | list[Any],
        effort: str | None = None,
        stream: Literal[False] = False,
        *,
        extra_body: Mapping[str, Any] | None = None,
        **fields: Any,
    ) -> _Reply: ...
    @overload
    def responses(
        self,
        model: str,
        input: str | list[Any],
        effort: str | None = None,
        *,
        stream: Literal[True],
        extra_body: Mapping[str, Any] | None = None,
        **fields: Any,
    ) -> _TextStream: ...
    @overload
    def responses(
        self,
        model: str,
        input: str | list[Any],
        effort: str | None = None,
        stream: bool = False,
        *,
        extra_body: Mapping[str, Any] | None = None,
        **fields: Any,
    ) -> _Reply | _TextStream: ...
    def responses(
        self,
        model: str,
        input: str | list[Any],
        effort: str | None = None,
        stream: bool = False,
        *,
        extra_body: Mapping[str, Any] | None = None,
        **fields: Any,
    ) -> Any:
        """The responses endpoint (reasoning models): a `Reply` with ``.text`` and ``.reasoning``."""
        data: dict[str, Any] = {"model": model, "input": input, "stream": stream}
        if effort is not None:
            data["reasoning"] = {**(fields.pop("reasoning", None) or {}), "effort": effort}
        request = self._request(schemas.ResponsesRequest, self.responses, data, fields, extra_body)
        return self._run(
            self._native(Call("POST", "/v1/responses", _dump(request), stream, model), ResponsesDecoder)
        )

    @overload
    def converse(
        self,
        api: str,
        model: str,
        messages: Messages,
        *,
        stream: Literal[False] = False,
        temperature: float | None = None,
        top_p: float | None = None,
        max_tokens: int | None = None,
        effort: str | None = None,
    ) -> _Completion | _Reply: ...
    @overload
    def converse(
        self,
        api: str,
        model: str,
        messages: Messages,
        *,
        stream: Literal[True],
        temperature: float | None = None,
        top_p: float | None = None,
        max_tokens: int | None = None,
        effort: str | None = None,
    ) -> _ChatStream | _TextStream: ...
    @overload
    def converse(
        self,
        api: str,
        model: str,
        messages: Messages,
        *,
        stream: bool = False,
        temperature: float | None = None,
        top_p: float | None = None,
        max_tokens: int | None = None,
        effort: str | None = None,
    ) -> _Completion | _Reply | _ChatStream | _TextStream: ...
    def converse(
        self,
        api: str,
        model: str,
        messages: Messages,
        *,
        stream: bool = False,
        temperature: float | None = None,
        top_p: float | None = None,
        max_tokens: int | None = None,
        effort: str | None = None,
    ) -> Any:
        """One conversation (chat-style ``messages``: system and turns) on the text API named
        by ``api``: "chat", "messages", "generate-content" or "responses" (see `conversation`).
        The result is that endpoint's: a `ChatCompletion` or a `Reply`, or their streams."""
        method, arguments = for_api(
            api, model, messages, temperature=temperature, top_p=top_p, max_tokens=max_tokens, effort=effort
        )
        return getattr(self, method)(stream=stream, **arguments)

    # -- media ------------------------------------------------------------------------

    def image(
        self,
        model: str,
        prompt: str,
        size: str | None = None,
        *,
        extra_body: Mapping[str, Any] | None = None,
        **fields: Any,
    ) -> _Image:
        """Image generation: `ImageResult` whose ``images`` come from ``b64_json`` or URLs."""
        data = {"model": model, "prompt": prompt, "size": size}
        request = self._request(schemas.ImageRequest, self.image, data, fields, extra_body)
        call = Call("POST", "/v1/images/generations", _dump(request), model=model)
        return self._run(self._call(call, self._image))

    def speech(
        self,
        model: str,
        voice: str,
        input: str,
        response_format: str | None = None,
        *,
        extra_body: Mapping[str, Any] | None = None,
        **fields: Any,
    ) -> _Audio:
        """Text to speech: `Audio` bytes, with the format sniffed from the bytes themselves."""
        data = {"model": model, "voice": voice, "input": input, "response_format": response_format}
        request = self._request(schemas.SpeechRequest, self.speech, data, fields, extra_body)
        call = Call("POST", "/v1/audio/speech", _dump(request), model=model, media=True)
        return self._run(self._call(call, self._speech((request.model_extra or {}).get("response_format"))))

    def models(self) -> _Models:
        """GET /v1/models. What it says about endpoints teaches the reasoning router."""
        return self._run(self._call(Call("GET", "/v1/models"), self._models))

    # -- jobs -------------------------------------------------------------------------

    def imagine(
        self,
        prompt: str,
        *,
        wait: bool = False,
        on_progress: Callable[[Job], Any] | None = None,
        timeout: float = 600,
        interval: float | None = None,
        extra_body: Mapping[str, Any] | None = None,
        **fields: Any,
    ) -> _Job:
        """Job-style image: submit, and with ``wait`` poll until done."""
        request = self._request(schemas.ImagineRequest, self.imagine, {"prompt": prompt}, fields, extra_body)
        return self._run(self._submit("imagine", request, None, (wait, on_progress, timeout, interval)))

    def video(
        self,
        model: str,
        prompt: str,
        *,
        wait: bool = False,
        on_progress: Callable[[Job], Any] | None = None,
        timeout: float = 600,
        interval: float | None = None,
        extra_body: Mapping[str, Any] | None = None,
        **fields: Any,
    ) -> _Job:
        """Video generation (a job: queued, in progress, completed; content fetched on use)."""
        data = {"model": model, "prompt": prompt}
        request = self._request(schemas.VideoRequest, self.video, data, fields, extra_body)
        return self._run(self._submit("video", request, model, (wait, on_progress, timeout, interval)))

    def music(
        self,
        prompt: str,
        style: str | None = None,
        *,
        wait: bool = False,
        on_progress: Callable[[Job], Any] | None = None,
        timeout: float = 600,
        interval: float | None = None,
        extra_body: Mapping[str, Any] | None = None,
        **fields: Any,
    ) -> _Job:
        """Job-style music: submit, and with ``wait`` poll until done."""
        data = {"prompt": prompt, "style": style}
        request = self._request(schemas.MusicRequest, self.music, data, fields, extra_body)
        return self._run(self._submit("music", request, None, (wait, on_progress, timeout, interval)))

    def job(self, id: str, second: str | None = None, *, kind: str | None = None) -> _Job:
        """One poll of a job by its id. Its kind ("imagine", "music", "video") comes from the
        log when not given, so a new kernel picks a job up knowing only its id;
        ``job(kind, id)``, the older order, works too."""
        if second is not None:
            kind, id = id, second
        job_id = str(id)
        return self._run(self._poll(Job(kind or self._journaled().kind_of(job_id), job_id)))

    def wait(
        self,
        job: Job,
        on_progress: Callable[[Job], Any] | None = None,
        timeout: float = 600,
        interval: float | None = None,
    ) -> _Job:
        """Poll ``job`` until it succeeds (returned) or fails or times out (`JobError`)."""
        return self._run(wait_program(self._poll, job, on_progress, timeout, interval or self.job_interval))

    # -- requests ---------------------------------------------------------------------

    @staticmethod
    def _request(
        model: type[schemas.R],
        method: Callable[..., Any],
        data: dict[str, Any],
        fields: dict[str, Any],
        extra_body: Mapping[str, Any] | None,
    ) -> schemas.R:
        """The validated request: the method's arguments, the body fields it may take, and
        ``extra_body`` as it is."""
        if fields:
            schemas.refuse_unknown(model, method, fields)
            data.update(fields)
        if extra_body:
            data.update(extra_body)
        return schemas.validate(model, data)

    def _build(self, call: Call) -> httpx.Request:
        url = self.base_url + call.path if call.path[:1] == "/" else call.path  # absolute: no merge
        if call.stream:
            request = self._http.build_request(
                call.method, url, content=call.body, headers=_SSE, timeout=self._stream_timeout
            )
            request.extensions[LIMITS] = Limits(self._json_cap)
        else:
            request = self._http.build_request(call.method, url, content=call.body)
            cap = self._media_cap if call.media else self._json_cap
            request.extensions[LIMITS] = Limits(cap, self.request_timeout)
        if call.auth != "bearer" and self._api_key:
            del request.headers["authorization"]
            if call.auth == "goog":
                request.headers["x-goog-api-key"] = self._api_key.reveal()
        return request

    # -- programs (sans-IO; see exchange) ---------------------------------------------

    def _call(self, call: Call, parse: Parse) -> Program[Any]:
        """One call, start to end: send it (with retries and redirects), parse the answer,
        and hand the `Outcome` to `_record`; a stream hands over its own when it ends.
        With the cache on, a request answered before is answered from the log instead, by
        the same parser, and nothing is sent."""
        context, at = current(), time.time()
        key = hit = None
        if self._asks_cache(call, context):
            key, hit = self._journaled().lookup(call)
        try:
            if hit is not None:
                response, meta = self._journaled().replayed(call, hit)
            else:
                response, meta = yield from exchange(self._build, call, self.retry, self.api_key)
                if call.stream and not _is_sse(response):
                    yield Read(response)  # a whole body where a stream was asked: parsed as one
            result = parse(call, response, meta)
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            failure = connection_error(exc, call)
            self._record(Outcome(call, error=failure, context=context, at=at, cache_key=key))
            raise failure from None
        except GatecellError as error:
            self._record(Outcome(call, error=error, context=context, at=at, cache_key=key))
            raise
        if isinstance(result, _Stream):
            result.on_end = lambda stream, error: self._record(
                Outcome(call, stream, error, meta, not stream.complete, context=context, at=at, cache_key=key)
            )
        else:
            body = None if call.stream or _is_sse(response) else response.content
            self._record(Outcome(call, result, meta=meta, body=body, context=context, at=at, cache_key=key))
        return result

    def _asks_cache(self, call: Call, context: CallContext) -> bool:
        """Whether to answer ``call`` from the log: the call's say, else the client's."""
        if not (self.cache or context.cache):
            return False
        from .journal import Journal

        return Journal.wanted(call, self.cache, context)

    def _journaled(self) -> Journal:
        """This client's side of the store, made on first use (it loads SQLite)."""
        if self._journal is None:
            from .journal import Journal

            self._journal = Journal(self)
        return self._journal

    def _record(self, outcome: Outcome) -> None:
        """Where every call's outcome arrives: each endpoint, both clients, streamed or not
        (a stream's once it is complete, cut or closed). It is logged in the store (unless
        ``log`` is off) and as one DEBUG line."""
        if self.log:
            try:
                self._journaled().record(outcome)
            except Exception as exc:  # the log must never cost the caller its answer
                logger.warning("gatecell: an exchange was not logged (%s: %s)", type(exc).__name__, exc)
        if not logger.isEnabledFor(logging.DEBUG):
            return
        call, meta, error = outcome.call, outcome.meta, outcome.error
        line = f"{call.method} {call.path} model={call.model} -> "
        if meta is not None:
            line += f"{meta.status} in {meta.latency:.3f}s (request id {meta.request_id})"
            if meta.cached:
                line += ", from the cache"
            if isinstance(outcome.result, _Stream):
                line += ", stream " + ("cut" if error else "closed early" if outcome.partial else "complete")
        if error is not None:
            line += f"{': ' if meta else ''}{error}"
        logger.debug("%s", line)

    def _json(self, response: httpx.Response, call: Call) -> Any:
        """The body as JSON (or text), refusing a 200 that carries an error object."""
        body = json_body(response.content)
        error = body_error(response, body, self.api_key, call)
        if error is not None:
            raise error
        return body

    def _chat(self, request: schemas.ChatRequest) -> Program[Any]:
        if not self.router.wants_responses(request.model):
            try:
                return (yield from self._chat_completions(request))
            except APIError as error:
                if not self.router.is_refusal(error):
                    raise
                self.router.remember(request.model)
                logger.info(
                    "model %s is served by /v1/responses only (%s); retrying there",
                    request.model,
                    error.message,
                )
        return (yield from self._chat_responses(request))

    def _chat_completions(self, request: schemas.ChatRequest) -> Program[Any]:
        call = Call("POST", "/v1/chat/completions", _dump(request), request.stream, request.model)
        return self._call(
            call, self._opener(ChatDecoder, self._chat_stream) if request.stream else self._completion
        )

    def _completion(self, call: Call, response: httpx.Response, meta: ResponseMeta) -> ChatCompletion:
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
                    status=response.status_code,
                    method="POST",
                    path=call.path,
                    request_id=meta.request_id,
                )
        meta.usage = completion.usage
        completion._meta = meta
        return completion

    def _chat_responses(self, request: schemas.ChatRequest) -> Program[Any]:
        body = to_responses(request.model_dump(exclude_none=True))
        call = Call("POST", "/v1/responses", json.dumps(body).encode(), request.stream, request.model)
        parse = (
            self._opener(ResponsesDecoder, self._chat_stream)
            if request.stream
            else self._responses_completion
        )
        return self._call(call, parse)

    def _responses_completion(
        self, call: Call, response: httpx.Response, meta: ResponseMeta
    ) -> ChatCompletion:
        if _is_sse(response):
            return self._collect(response, meta, call, ResponsesDecoder)
        completion = ChatCompletion.model_validate(to_chat(self._json(response, call), call.model or ""))
        meta.usage = completion.usage
        completion._meta = meta
        return completion

    def _collect(
        self, response: httpx.Response, meta: ResponseMeta, call: Call, decoder_cls: type[Decoder]
    ) -> ChatCompletion:
        """A whole SSE body (already read) as one `ChatCompletion`."""
        decoder = decoder_cls(None, call.path, self.api_key)
        decoder.feed(response.content)
        decoder.finish()
        return ChatStream(response, decoder, meta).completion()

    def _opener(self, decoder_cls: type[Decoder], stream_cls: type[_Stream]) -> Parse:
        """How to open a stream: parsed by what Content-Type says rather than by what was
        asked (a plain body where a stream was asked is one fragment). The whole stream is
        capped like a JSON body, by the transport."""

        def parse(call: Call, response: httpx.Response, meta: ResponseMeta) -> _Stream:
            if _is_sse(response):
                # One event is at most half a legitimate stream (responses repeat the whole
                # reply in their last event), so an endless line fails at half the cap.
                max_event = self._json_cap // 2
                decoder = decoder_cls(self.stream_idle_timeout, call.path, self.api_key, max_event)
            else:
                decoder = BodyDecoder(self._json(response, call), path=call.path)
            return stream_cls(response, decoder, meta)

        return parse

    def _native(self, call: Call, decoder_cls: type[Decoder]) -> Program[Any]:
        return self._call(call, self._opener(decoder_cls, self._text_stream) if call.stream else self._reply)

    def _reply(self, call: Call, response: httpx.Response, meta: ResponseMeta) -> Reply:
        reply = Reply(self._json(response, call), meta)
        meta.usage = usage_of(reply.usage)
        return reply

    def _image(self, call: Call, response: httpx.Response, meta: ResponseMeta) -> ImageResult:
        body = self._json(response, call)
        return ImageResult(body, images_of(body, self._media_for), meta)

    def _speech(self, requested: str | None) -> Parse:
        def parse(call: Call, response: httpx.Response, meta: ResponseMeta) -> Audio:
            mime = response.headers.get("content-type")
            if mime and mime.startswith(_JSON):
                self._json(response, call)  # a 200 carrying an error raises here
            return Audio(response.content, mime, meta, requested)

        return parse

    def _models(self, call: Call, response: httpx.Response, meta: ResponseMeta) -> ModelList:
        models = ModelList.from_body(self._json(response, call), meta)
        self.router.learn(models)
        return models

    def _submit(
        self, kind: str, request: Any, model: str | None, waiting: tuple[bool, Any, float, float | None]
    ) -> Program[Job]:
        def parse(call: Call, response: httpx.Response, meta: ResponseMeta) -> Job:
            body = self._json(response, call)
            return self._job_from(kind, submitted_id(kind, body), body, meta)

        job = yield from self._call(
            Call("POST", self.job_paths.submit(kind), _dump(request), model=model), parse
        )
        wait, on_progress, timeout, interval = waiting
        if wait:
            job = yield from wait_program(
                self._poll, job, on_progress, timeout, interval or self.job_interval
            )
        return job

    def _poll(self, job: Job) -> Program[Job]:
        def parse(call: Call, response: httpx.Response, meta: ResponseMeta) -> Job:
            return self._job_from(job.kind, job.id, self._json(response, call), meta)

        return self._call(Call("GET", self.job_paths.fetch(job.kind, job.id), logged=False), parse)

    def _job_from(self, kind: str, job_id: str, body: Any, meta: ResponseMeta) -> Job:
        job = job_state(kind, job_id, body, self.job_paths)
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

    def _own(self, url: str) -> bool:
        """Whether ``url`` is on the gateway's own origin (relative, or the same origin)."""
        try:
            target = httpx.URL(url)
        except httpx.InvalidURL:
            return False  # and the request fails, in its program, as one line
        return not target.is_absolute_url or same_origin(self._origin, target)


class Gateway(
    _Endpoints[ChatCompletion, ChatStream, Reply, TextStream, ImageResult, Audio, ModelList, Job],
    Closing,
):
    """Synchronous client. ``with Gateway() as gw: gw.chat(...)``."""

    _chat_stream = ChatStream
    _text_stream = TextStream
    _http: httpx.Client

    def _connect(self, **options: Any) -> httpx.Client:
        return httpx.Client(transport=LimitedTransport(httpx.HTTPTransport()), **options)

    def _run(self, program: Program[T]) -> T:
        return run(program, self._http)

    def map(self, template: str, data: Any, *, progress: bool = True, **options: Unpack[MapOptions]) -> Batch:
        """One prompt per row of ``data``: ``template``'s ``{field}`` filled from the row (a
        DataFrame's columns, ``{item}`` for plain values), sent with up to ``concurrency``
        requests at once within ``rpm``/``tpm``; a `Batch` of the replies, with a progress bar.
        The options (model, api, system, temperature, top_p, max_tokens, concurrency, rpm,
        tpm, max_retries, cache, on_error) are `gatecell.batch.MapOptions`.

        Finished rows are logged and, with ``cache`` (the default), answered from the log, so
        running it again after an interrupt sends only the rest. A row that still fails after
        its retries records its error (``on_error="raise"``: `BatchError`). Ctrl-C returns
        the rows done so far. See `gatecell.batch`.
        """
        from gatecell.batch import run as run_map

        return run_map(self, template, data, progress=progress, **options)

    def close(self) -> None:
        self._http.close()


class AsyncGateway(
    _Endpoints[
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

    def _connect(self, **options: Any) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=LimitedTransport(httpx.AsyncHTTPTransport()), **options)

    def _run(self, program: Program[T]) -> Coroutine[Any, Any, T]:
        return arun(program, self._http)

    async def map(
        self, template: str, data: Any, *, progress: bool = True, **options: Unpack[MapOptions]
    ) -> Batch:
        """`Gateway.map`, on the running event loop."""
        from gatecell.batch import arun as arun_map

        return await arun_map(self, template, data, progress=progress, **options)

    async def aclose(self) -> None:
        await self._http.aclose()
