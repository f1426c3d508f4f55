"""`Gateway` and `AsyncGateway`: one method per endpoint of SPEC section 4.

Every endpoint method is written once, in `_Endpoints`: it validates its arguments
(SPEC 2 and 8, before anything is sent), builds a sans-IO *program* (see `exchange`) and
hands it to ``self._run``, which carries it out with the client's `_IO`: `Gateway`
returns the result, `AsyncGateway` a coroutine giving it. So the two clients cannot drift
apart: they share every decision and differ only in the calls that do I/O.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx

from gatecell import __version__

from . import schemas
from .deadline import DEADLINE, CappedTransport
from .decoders import (
    BodyDecoder,
    ChatDecoder,
    Decoder,
    GenerateContentDecoder,
    MessagesDecoder,
    ResponsesDecoder,
)
from .error_mapping import body_error, connection_error, json_body
from .errors import APIError, InvalidRequest
from .exchange import Call, Program, Read, Send, Sleep, exchange, logger
from .jobs import JobPaths, job_state, submitted_id, wait_program
from .results import Audio, ImageResult, Job, Media, ModelList, Reply, ResponseMeta, images_of
from .retry import RetryPolicy
from .routing import PatternLike, Router, to_chat, to_responses
from .schemas import ChatCompletion
from .secret import Secret
from .settings import env_number, resolve
from .streams import AsyncChatStream, AsyncClosing, AsyncTextStream, ChatStream, Closing, TextStream

__all__ = [
    "Gateway",
    "AsyncGateway",
    "ChatStream",
    "AsyncChatStream",
    "TextStream",
    "AsyncTextStream",
    "JobPaths",
    "logger",
]

_USER_AGENT = f"gatecell/{__version__}"
_JSON = ("application/json",)
_SSE = {"accept": "text/event-stream"}


def _dump(request: Any) -> bytes:
    return request.model_dump_json(exclude_none=True).encode()


def _is_sse(response: httpx.Response) -> bool:
    return response.headers.get("content-type", "").startswith("text/event-stream")


@dataclass(frozen=True)
class _IO:
    """All that differs between the two clients: the I/O calls and the stream classes."""

    client: type[httpx.Client] | type[httpx.AsyncClient]
    chat_stream: type[ChatStream] | type[AsyncChatStream]
    text_stream: type[TextStream] | type[AsyncTextStream]
    transport: type[httpx.HTTPTransport] | type[httpx.AsyncHTTPTransport]
    read: Callable[[httpx.Response], Any]
    sleep: Callable[[float], Any]
    asynchronous: bool


class _Done:
    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


def _step(program: Program, result: Any, error: BaseException | None) -> Any:
    """Advance a program by one command; `_Done` when it returns."""
    try:
        return program.send(result) if error is None else program.throw(error)
    except StopIteration as stop:
        return _Done(stop.value)
    except httpx.HTTPError as exc:  # a transport error no program step claimed
        raise connection_error(exc) from None


async def _drive(program: Program, act: Callable[[Any], Awaitable[Any]]) -> Any:
    """Carry out a program's commands with ``act``, handing back results and transport errors.

    The one driver of both clients: `AsyncGateway` awaits it; `Gateway` passes an ``act``
    that never suspends and runs the coroutine to its end at once with `_now`.
    """
    result: Any = None
    error: BaseException | None = None
    while True:
        command = _step(program, result, error)
        if type(command) is _Done:
            return command.value
        try:
            result, error = await act(command), None
        except httpx.HTTPError as exc:
            result, error = None, exc


def _now(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """Run a coroutine that never suspends, synchronously."""
    try:
        coroutine.send(None)
    except StopIteration as stop:
        return stop.value
    coroutine.close()
    raise RuntimeError("a synchronous gateway action suspended")


class _Endpoints:
    """The endpoints, written once for both clients. Subclasses provide `_io`."""

    _io: _IO
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
        reasoning_patterns: Iterable[PatternLike] | None = None,
        job_paths: JobPaths | None = None,
        backoff: float = 0.5,
        retry_after_cap: float = 60.0,
        job_interval: float = 2.0,
    ) -> None:
        settings = resolve(base_url, api_key)
        if not settings.base_url:  # nothing configured: gatecell.connect's policy, the local gateway
            from gatecell.connect import choose

            settings = choose()
        assert settings.base_url is not None  # for mypy: the policy always finds one
        self.base_url: str = settings.base_url
        # Unset numbers come from GATECELL_TIMEOUT, GATECELL_CONNECT_TIMEOUT,
        # GATECELL_STREAM_IDLE_TIMEOUT, GATECELL_REQUEST_TIMEOUT and GATECELL_MAX_RETRIES.
        # `timeout` bounds each read or write; `request_timeout` the whole of a
        # non-streaming request (each attempt); streams have the idle timeout instead.
        timeout = env_number(timeout, "GATECELL_TIMEOUT", 60.0)
        connect_timeout = env_number(connect_timeout, "GATECELL_CONNECT_TIMEOUT", 5.0)
        stream_idle_timeout = env_number(stream_idle_timeout, "GATECELL_STREAM_IDLE_TIMEOUT", 60.0)
        self.request_timeout = env_number(request_timeout, "GATECELL_REQUEST_TIMEOUT", 600.0)
        retries = int(env_number(max_retries, "GATECELL_MAX_RETRIES", 2))
        self.stream_idle_timeout = stream_idle_timeout
        self.retry = RetryPolicy(max_retries=retries, base=backoff, retry_after_cap=retry_after_cap)
        self.router = Router(reasoning_patterns)
        self.job_paths = job_paths or JobPaths()
        self.job_interval = job_interval
        self._timeout = httpx.Timeout(timeout, connect=connect_timeout)
        self._stream_timeout = httpx.Timeout(timeout, connect=connect_timeout, read=stream_idle_timeout)
        self._origin = httpx.URL(self.base_url).copy_with(path="/", query=None, fragment=None)
        self._http = self._io.client(
            base_url=self.base_url,
            timeout=self._timeout,
            headers={"user-agent": _USER_AGENT, "content-type": "application/json"},
            transport=CappedTransport(self._io.transport()),
        )
        self.api_key = settings.api_key

    @property
    def api_key(self) -> Secret | None:
        return self._api_key

    @api_key.setter
    def api_key(self, value: str | Secret | None) -> None:
        """The bearer header lives in the connection pool's defaults (built once, not per
        request; httpx shows it as ``[secure]``); requests that must not carry it drop it."""
        self._api_key = Secret(value) if isinstance(value, str) and value else value or None
        if self._api_key:
            self._http.headers["authorization"] = "Bearer " + self._api_key.reveal()
        else:
            self._http.headers.pop("authorization", None)

    def _run(self, program: Program) -> Any:
        """The result of ``program``; on `AsyncGateway`, a coroutine giving it."""
        coroutine = _drive(program, self._act)
        return coroutine if self._io.asynchronous else _now(coroutine)

    async def _act(self, command: Send | Read | Sleep) -> Any:
        """Carry out one command. The I/O calls come from the subclass: plain on `Gateway`
        (so this never suspends), awaitables on `AsyncGateway`."""
        outcome: Any
        if isinstance(command, Send):
            outcome = self._http.send(command.request, stream=command.stream, follow_redirects=command.follow)
        elif isinstance(command, Read):
            outcome = self._io.read(command.response)
        else:
            outcome = self._io.sleep(command.seconds)
        return (await outcome) if self._io.asynchronous else outcome

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base_url={self.base_url!r}, api_key={self.api_key!r})"

    # -- conversation -----------------------------------------------------------------

    def chat(
        self,
        model: str,
        messages: list[dict[str, Any]],
        temperature: float | None = None,
        top_p: float | None = None,
        max_tokens: int | None = None,
        stream: bool = False,
        **extra: Any,
    ) -> ChatCompletion | ChatStream:
        """Chat completion (SPEC 2.1-2.4): a `ChatCompletion`, or a `ChatStream` of text.

        A reasoning model goes to /v1/responses instead (SPEC 4 note 3); the answer is still
        a `ChatCompletion` (or a stream of its text). On `AsyncGateway`, await it.
        """
        request = schemas.validate(
            schemas.ChatRequest,
            {
                "model": model,
                "messages": messages,
                "temperature": temperature,
                "top_p": top_p,
                "max_tokens": max_tokens,
                "stream": stream,
                **extra,
            },
        )
        return self._run(self._chat(request))

    def messages(
        self,
        model: str,
        messages: list[dict[str, Any]],
        max_tokens: int = 1024,
        stream: bool = False,
        **extra: Any,
    ) -> Reply | TextStream:
        """Native messages endpoint: a `Reply` (``.text`` recognised), or a `TextStream`."""
        request = schemas.validate(
            schemas.MessagesRequest,
            {"model": model, "messages": messages, "max_tokens": max_tokens, "stream": stream, **extra},
        )
        return self._run(
            self._native(Call("POST", "/v1/messages", _dump(request), stream, model), MessagesDecoder)
        )

    def generate_content(
        self, model: str, contents: str | list[dict[str, Any]], stream: bool = False, **extra: Any
    ) -> Reply | TextStream:
        """Native generate-content; ``contents`` may be a plain prompt. The key travels in
        ``x-goog-api-key`` here (SPEC 5), and the model in the path."""
        if not isinstance(model, str) or not model.strip():
            raise InvalidRequest("model", "must not be empty")
        if isinstance(contents, str):
            contents = [{"role": "user", "parts": [{"text": contents}]}]
        request = schemas.validate(schemas.GenerateContentRequest, {"contents": contents, **extra})
        name = quote(model.removeprefix("models/"), safe="-._~@")
        path = (
            f"/v1beta/models/{name}:streamGenerateContent?alt=sse"
            if stream
            else f"/v1beta/models/{name}:generateContent"
        )
        return self._run(
            self._native(
                Call("POST", path, _dump(request), stream, model, auth="goog"), GenerateContentDecoder
            )
        )

    def responses(
        self,
        model: str,
        input: str | list[Any],
        effort: str | None = None,
        stream: bool = False,
        **extra: Any,
    ) -> Reply | TextStream:
        """The responses endpoint (reasoning models): a `Reply` with ``.text`` and ``.reasoning``."""
        data = {"model": model, "input": input, "stream": stream, **extra}
        if effort is not None:
            data["reasoning"] = {**data.get("reasoning", {}), "effort": effort}
        request = schemas.validate(schemas.ResponsesRequest, data)
        return self._run(
            self._native(Call("POST", "/v1/responses", _dump(request), stream, model), ResponsesDecoder)
        )

    # -- media ------------------------------------------------------------------------

    def image(self, model: str, prompt: str, size: str | None = None, **extra: Any) -> ImageResult:
        """Image generation: `ImageResult` whose ``images`` come from ``b64_json`` or URLs."""
        request = schemas.validate(
            schemas.ImageRequest, {"model": model, "prompt": prompt, "size": size, **extra}
        )
        return self._run(self._image(Call("POST", "/v1/images/generations", _dump(request), model=model)))

    def speech(
        self, model: str, voice: str, input: str, response_format: str | None = None, **extra: Any
    ) -> Audio:
        """Text to speech: `Audio` bytes, with the format sniffed from the bytes themselves."""
        request = schemas.validate(
            schemas.SpeechRequest,
            {"model": model, "voice": voice, "input": input, "response_format": response_format, **extra},
        )
        return self._run(
            self._speech(Call("POST", "/v1/audio/speech", _dump(request), model=model), response_format)
        )

    def models(self) -> ModelList:
        """GET /v1/models. What it says about endpoints teaches the reasoning router."""
        return self._run(self._models())

    # -- jobs -------------------------------------------------------------------------

    def imagine(
        self,
        prompt: str,
        *,
        wait: bool = False,
        on_progress: Callable[[Job], Any] | None = None,
        timeout: float = 600,
        interval: float | None = None,
        **extra: Any,
    ) -> Job:
        """Job-style image: submit, and with ``wait`` poll until done."""
        request = schemas.validate(schemas.ImagineRequest, {"prompt": prompt, **extra})
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
        **extra: Any,
    ) -> Job:
        """Video generation (a job: queued, in progress, completed; content fetched on use)."""
        request = schemas.validate(schemas.VideoRequest, {"model": model, "prompt": prompt, **extra})
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
        **extra: Any,
    ) -> Job:
        """Job-style music: submit, and with ``wait`` poll until done."""
        request = schemas.validate(schemas.MusicRequest, {"prompt": prompt, "style": style, **extra})
        return self._run(self._submit("music", request, None, (wait, on_progress, timeout, interval)))

    def job(self, kind: str, id: str) -> Job:
        """One poll of a job by kind ("imagine", "music", "video") and id."""
        return self._run(self._poll(Job(kind, str(id))))

    def wait(
        self,
        job: Job,
        on_progress: Callable[[Job], Any] | None = None,
        timeout: float = 600,
        interval: float | None = None,
    ) -> Job:
        """Poll ``job`` until it succeeds (returned) or fails or times out (`JobError`)."""
        return self._run(wait_program(self._poll, job, on_progress, timeout, interval or self.job_interval))

    # -- programs (sans-IO; see exchange) ---------------------------------------------

    def _build(self, call: Call) -> httpx.Request:
        url = (
            self.base_url + call.path if call.path[:1] == "/" else call.path
        )  # absolute: no merge per request
        if call.stream:
            request = self._http.build_request(
                call.method, url, content=call.body, headers=_SSE, timeout=self._stream_timeout
            )
        else:
            request = self._http.build_request(call.method, url, content=call.body)
            request.extensions[DEADLINE] = (time.monotonic() + self.request_timeout, self.request_timeout)
        if call.auth != "bearer" and self._api_key:
            del request.headers["authorization"]
            if call.auth == "goog":
                request.headers["x-goog-api-key"] = self._api_key.reveal()
        return request

    def _exchange(self, call: Call) -> Program:
        return exchange(self._build, call, self.retry, self.api_key)

    def _json(self, response: httpx.Response, call: Call) -> Any:
        """The body as JSON (or text), refusing a 200 that carries an error object."""
        body = json_body(response.content)
        error = body_error(response, body, self.api_key, call)
        if error is not None:
            raise error
        return body

    def _chat(self, request: schemas.ChatRequest) -> Program:
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

    def _chat_completions(self, request: schemas.ChatRequest) -> Program:
        call = Call("POST", "/v1/chat/completions", _dump(request), request.stream, request.model)
        response, meta = yield from self._exchange(call)
        if request.stream:
            return (yield from self._stream(response, meta, call, ChatDecoder, self._io.chat_stream))
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

    def _chat_responses(self, request: schemas.ChatRequest) -> Program:
        body = to_responses(request.model_dump(exclude_none=True))
        call = Call("POST", "/v1/responses", json.dumps(body).encode(), request.stream, request.model)
        response, meta = yield from self._exchange(call)
        if request.stream:
            return (yield from self._stream(response, meta, call, ResponsesDecoder, self._io.chat_stream))
        if _is_sse(response):
            return self._collect(response, meta, call, ResponsesDecoder)
        completion = ChatCompletion.model_validate(to_chat(self._json(response, call), request.model))
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

    def _stream(
        self,
        response: httpx.Response,
        meta: ResponseMeta,
        call: Call,
        decoder_cls: type[Decoder],
        stream_cls: type[Any],
    ) -> Program:
        """A stream object, parsed by what Content-Type says rather than by what was asked."""
        if _is_sse(response):
            return stream_cls(response, decoder_cls(self.stream_idle_timeout, call.path, self.api_key), meta)
        yield Read(response)
        body = self._json(response, call)
        return stream_cls(response, BodyDecoder(body, path=call.path), meta)

    def _native(self, call: Call, decoder_cls: type[Decoder]) -> Program:
        response, meta = yield from self._exchange(call)
        if call.stream:
            return (yield from self._stream(response, meta, call, decoder_cls, self._io.text_stream))
        reply = Reply(self._json(response, call), meta)
        meta.usage = reply.usage
        return reply

    def _image(self, call: Call) -> Program:
        response, meta = yield from self._exchange(call)
        body = self._json(response, call)
        return ImageResult(body, images_of(body, self._media_for), meta)

    def _speech(self, call: Call, requested: str | None) -> Program:
        response, meta = yield from self._exchange(call)
        mime = response.headers.get("content-type")
        if mime and mime.startswith(_JSON):
            self._json(response, call)  # a 200 carrying an error raises here
        return Audio(response.content, mime, meta, requested)

    def _models(self) -> Program:
        call = Call("GET", "/v1/models")
        response, meta = yield from self._exchange(call)
        models = ModelList.from_body(self._json(response, call), meta)
        self.router.learn(models)
        return models

    def _submit(
        self, kind: str, request: Any, model: str | None, waiting: tuple[bool, Any, float, float | None]
    ) -> Program:
        call = Call("POST", self.job_paths.submit(kind), _dump(request), model=model)
        response, meta = yield from self._exchange(call)
        body = self._json(response, call)
        job = self._job_from(kind, submitted_id(kind, body), body, meta)
        wait, on_progress, timeout, interval = waiting
        if wait:
            job = yield from wait_program(
                self._poll, job, on_progress, timeout, interval or self.job_interval
            )
        return job

    def _poll(self, job: Job) -> Program:
        call = Call("GET", self.job_paths.fetch(job.kind, job.id))
        response, meta = yield from self._exchange(call)
        return self._job_from(job.kind, job.id, self._json(response, call), meta)

    def _job_from(self, kind: str, job_id: str, body: Any, meta: ResponseMeta) -> Job:
        job = job_state(kind, job_id, body, self.job_paths)
        job.meta = meta
        job._media_for = self._media_for
        return job

    def _media_for(self, url: str, mime: str | None) -> Media:
        """Media fetched on first use, with the key only on the gateway's own host."""
        return Media(url=url, mime=mime, load=lambda: self._run(self._fetch(url)))

    def _fetch(self, url: str) -> Program:
        target = httpx.URL(url)
        own = (
            not target.is_absolute_url
            or target.copy_with(path="/", query=None, fragment=None) == self._origin
        )
        response, _ = yield from self._exchange(Call("GET", url, auth="bearer" if own else "none"))
        return response.content, response.headers.get("content-type")


class Gateway(_Endpoints, Closing):
    """Synchronous client. ``with Gateway() as gw: gw.chat(...)``."""

    _io = _IO(
        httpx.Client,
        ChatStream,
        TextStream,
        httpx.HTTPTransport,
        httpx.Response.read,
        time.sleep,
        asynchronous=False,
    )
    _http: httpx.Client

    def close(self) -> None:
        self._http.close()


class AsyncGateway(_Endpoints, AsyncClosing):
    """Asynchronous client: the same methods, awaited; streams are used with ``async for``."""

    _io = _IO(
        httpx.AsyncClient,
        AsyncChatStream,
        AsyncTextStream,
        httpx.AsyncHTTPTransport,
        httpx.Response.aread,
        asyncio.sleep,
        asynchronous=True,
    )
    _http: httpx.AsyncClient

    async def aclose(self) -> None:
        await self._http.aclose()
