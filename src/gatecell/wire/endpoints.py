"""The endpoints of SPEC section 4, one method each, written once for every client.

Each method checks its arguments (SPEC 2 and 8, before anything is sent: `apis.spec`), builds
the request body and hands the program of its `Call` (see `calls`) to ``self._run``. A
subclass says what running is: `gatecell.gateway.Gateway` runs it with the sync driver and
returns the result, `AsyncGateway` returns the coroutine of the async driver, `Programs`
returns the program itself. `Endpoints` is generic in what its methods return, which is how
the types stay true for each: `Gateway.chat` returns a `ChatCompletion`, `AsyncGateway.chat`
a coroutine of one, `Programs.chat` a program.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any, Generic, Literal, TypedDict, TypeVar, overload
from urllib.parse import quote

from typing_extensions import Unpack

from gatecell.wire.apis import embeddings, spec
from gatecell.wire.apis._decoders import GenerateContentDecoder, MessagesDecoder, ResponsesDecoder
from gatecell.wire.apis.conversation import for_api, outgoing, with_parts
from gatecell.wire.apis.jobs import wait_program
from gatecell.wire.apis.streams import ChatStream, TextStream
from gatecell.wire.calls import Calls, Hooks, request_body
from gatecell.wire.transport.errors import APIError, InvalidRequest
from gatecell.wire.transport.exchange import Call, Program
from gatecell.wire.transport.results import Job
from gatecell.wire.typed.typed_calls import Typed, typed_request

__all__ = ["Endpoints", "Programs", "Messages", "ToolOptions"]

Messages = list[dict[str, Any]]


class ToolOptions(TypedDict, total=False):
    """``tools=`` and its options, as `Endpoints.converse` passes them on (see `gatecell.tools`)."""

    tools: Any
    approve: Callable[[Any], Any] | None
    max_rounds: int
    tool_timeout: float | None
    parallel: bool
    on_event: Callable[[Any], Any] | None
    tool_result_chars: int


# What the endpoints return: the result itself on `Gateway`, a coroutine of it on
# `AsyncGateway`, a program on `Programs`.
_Completion = TypeVar("_Completion")
_ChatStream = TypeVar("_ChatStream")
_Reply = TypeVar("_Reply")
_TextStream = TypeVar("_TextStream")
_Image = TypeVar("_Image")
_Audio = TypeVar("_Audio")
_Models = TypeVar("_Models")
_Job = TypeVar("_Job")
T = TypeVar("T")


class Endpoints(Calls, Generic[_Completion, _ChatStream, _Reply, _TextStream, _Image, _Audio, _Models, _Job]):
    """The endpoints; see the module. Construction is `Calls`'s."""

    # -- conversation -----------------------------------------------------------------
    #
    # Keyword arguments beyond a method's parameters are body fields, and must be ones
    # the endpoint is known to take (spec: ``known_fields``); any other name is refused
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
        schema: Any = None,
        choices: Any = None,
        repairs: int = 1,
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
        schema: Any = None,
        choices: Any = None,
        repairs: int = 1,
        extra_body: Mapping[str, Any] | None = None,
        **fields: Any,
    ) -> Any:
        """Chat completion (SPEC 2.1-2.4): a `ChatCompletion`, or a `ChatStream` of text.

        A reasoning model goes to /v1/responses instead (SPEC 4 note 3); the answer is still
        a `ChatCompletion` (or a stream of its text). With ``stream_usage`` a stream asks for
        its token usage. With ``schema`` or ``choices``, a typed answer: ``.parsed`` (see
        `typed_calls`; ``repairs`` rounds at most for an answer that does not validate). On
        `AsyncGateway`, await it.
        """
        typed = typed_request(schema, choices, repairs, stream)
        data: dict[str, Any] = {
            "model": model,
            "messages": with_parts("chat", messages),
            "temperature": temperature,
            "top_p": top_p,
            "max_tokens": max_tokens,
            "stream": stream,
        }
        if stream and self._asks_usage():
            data["stream_options"] = {"include_usage": True}
        tooling = self._tooling(fields, typed)
        body = self._body(spec.ChatRequest, self.chat, data, fields, extra_body)
        request_model = spec.ChatRequest
        return self._run(self._conversation("chat", model, request_model, body, typed, self._chat, tooling))

    @overload
    def messages(
        self,
        model: str,
        messages: Messages,
        max_tokens: int = 1024,
        stream: Literal[False] = False,
        *,
        schema: Any = None,
        choices: Any = None,
        repairs: int = 1,
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
        schema: Any = None,
        choices: Any = None,
        repairs: int = 1,
        extra_body: Mapping[str, Any] | None = None,
        **fields: Any,
    ) -> Any:
        """Native messages endpoint: a `Reply` (``.text`` recognised), or a `TextStream`;
        ``schema``, ``choices``, ``repairs``: as `chat`."""
        typed = typed_request(schema, choices, repairs, stream)
        data = {
            "model": model,
            "messages": with_parts("messages", messages),
            "max_tokens": max_tokens,
            "stream": stream,
        }
        tooling = self._tooling(fields, typed)
        body = self._body(spec.MessagesRequest, self.messages, data, fields, extra_body)

        def send(request: spec.MessagesRequest, schema: Any) -> Program[Any]:
            call = Call("POST", "/v1/messages", request_body(request), stream, model)
            return self._native(call, MessagesDecoder, schema)

        request_model = spec.MessagesRequest
        return self._run(self._conversation("messages", model, request_model, body, typed, send, tooling))

    @overload
    def generate_content(
        self,
        model: str,
        contents: str | Messages,
        stream: Literal[False] = False,
        *,
        schema: Any = None,
        choices: Any = None,
        repairs: int = 1,
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
        schema: Any = None,
        choices: Any = None,
        repairs: int = 1,
        extra_body: Mapping[str, Any] | None = None,
        **fields: Any,
    ) -> Any:
        """Native generate-content; ``contents`` may be a plain prompt. The key travels in
        ``x-goog-api-key`` here (SPEC 5), and the model in the path. ``schema``, ``choices``,
        ``repairs``: as `chat`."""
        typed = typed_request(schema, choices, repairs, stream)
        if not isinstance(model, str) or not model.strip():
            raise InvalidRequest("model", "must not be empty")
        if isinstance(contents, str):
            contents = [{"role": "user", "parts": [{"text": contents}]}]
        data = {"contents": with_parts("generate-content", contents)}
        tooling = self._tooling(fields, typed)
        body = self._body(spec.GenerateContentRequest, self.generate_content, data, fields, extra_body)
        name = quote(model.removeprefix("models/"), safe="-._~@")
        path = (
            f"/v1beta/models/{name}:streamGenerateContent?alt=sse"
            if stream
            else f"/v1beta/models/{name}:generateContent"
        )

        def send(request: spec.GenerateContentRequest, schema: Any) -> Program[Any]:
            call = Call("POST", path, request_body(request), stream, model, auth="goog")
            return self._native(call, GenerateContentDecoder, schema)

        request_model = spec.GenerateContentRequest
        return self._run(
            self._conversation("generate-content", model, request_model, body, typed, send, tooling)
        )

    @overload
    def responses(
        self,
        model: str,
        input: str | list[Any],
        effort: str | None = None,
        stream: Literal[False] = False,
        *,
        schema: Any = None,
        choices: Any = None,
        repairs: int = 1,
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
        schema: Any = None,
        choices: Any = None,
        repairs: int = 1,
        extra_body: Mapping[str, Any] | None = None,
        **fields: Any,
    ) -> Any:
        """The responses endpoint (reasoning models): a `Reply` with ``.text`` and
        ``.reasoning``; ``schema``, ``choices``, ``repairs``: as `chat`."""
        typed = typed_request(schema, choices, repairs, stream)
        data: dict[str, Any] = {
            "model": model,
            "input": with_parts("responses", input) if isinstance(input, list) else input,
            "stream": stream,
        }
        if effort is not None:
            data["reasoning"] = {**(fields.pop("reasoning", None) or {}), "effort": effort}
        tooling = self._tooling(fields, typed)
        body = self._body(spec.ResponsesRequest, self.responses, data, fields, extra_body)

        def send(request: spec.ResponsesRequest, schema: Any) -> Program[Any]:
            call = Call("POST", "/v1/responses", request_body(request), stream, model)
            return self._native(call, ResponsesDecoder, schema)

        request_model = spec.ResponsesRequest
        return self._run(self._conversation("responses", model, request_model, body, typed, send, tooling))

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
        schema: Any = None,
        choices: Any = None,
        repairs: int = 1,
        **tools: Unpack[ToolOptions],
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
        **tools: Unpack[ToolOptions],
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
        **tools: Unpack[ToolOptions],
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
        schema: Any = None,
        choices: Any = None,
        repairs: int = 1,
        **tools: Unpack[ToolOptions],
    ) -> Any:
        """One conversation (chat-style ``messages``: system and turns) on the text API named
        by ``api``: "chat", "messages", "generate-content" or "responses" (see `conversation`).
        The result is that endpoint's: a `ChatCompletion` or a `Reply`, or their streams;
        ``schema``, ``choices``, ``repairs``: as `chat`; ``tools=`` and its options, too."""
        method, arguments = for_api(
            api, model, messages, temperature=temperature, top_p=top_p, max_tokens=max_tokens, effort=effort
        )
        return getattr(self, method)(
            stream=stream, schema=schema, choices=choices, repairs=repairs, **arguments, **tools
        )

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
        request = self._request(spec.ImageRequest, self.image, data, fields, extra_body)
        call = Call("POST", "/v1/images/generations", request_body(request), model=model)
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
        request = self._request(spec.SpeechRequest, self.speech, data, fields, extra_body)
        call = Call("POST", "/v1/audio/speech", request_body(request), model=model, media=True)
        return self._run(self._call(call, self._speech((request.model_extra or {}).get("response_format"))))

    def models(self) -> _Models:
        """GET /v1/models. What it says about endpoints teaches the reasoning router."""
        return self._run(self._call(Call("GET", "/v1/models"), self._models))

    # -- meaning (WIRE-NOTES "Embeddings and rerank"; not in SPEC) ---------------------

    def _embeddings(
        self, model: str, texts: list[str], dimensions: int | None = None, **fields: Any
    ) -> Program[embeddings.Embeddings]:
        """The program of one ``/v1/embeddings`` request (``Gateway.embed`` batches, caches
        and paces them): the vectors of ``texts`` in their order, asked as base64."""
        data = {"model": model, "input": texts, "encoding_format": "base64", "dimensions": dimensions}
        body = self._body(embeddings.EmbeddingsRequest, self._embeddings, data, fields, None)
        request = spec.validate(embeddings.EmbeddingsRequest, body)
        count = len(request.input)

        def parse(call: Call, response: Any, meta: Any) -> embeddings.Embeddings:
            return embeddings.read_embeddings(self._json(response, call), count, call.path, meta)

        return _served(self._call(Call("POST", "/v1/embeddings", request_body(request), model=model), parse))

    def rerank(
        self,
        query: str,
        documents: list[str],
        model: str | None = None,
        top_n: int | None = None,
        *,
        extra_body: Mapping[str, Any] | None = None,
        **fields: Any,
    ) -> Any:
        """``documents`` ordered by relevance to ``query`` (``/v1/rerank``, the Cohere/Jina
        shape, which new-api and LiteLLM route): a `Reranked`, best first, ``top_n`` at most.
        ``model``: else ``GATECELL_RERANK_MODEL``, else ``local-embed``. A gateway that does
        not serve the path answers 404 or 405: an `APIError` saying so in one line. On
        `AsyncGateway`, await it."""
        documents = list(documents) if not isinstance(documents, str) else [documents]
        data = {
            "model": embeddings.rerank_model(model),
            "query": query,
            "documents": documents,
            "top_n": top_n,
        }
        request = self._request(embeddings.RerankRequest, self.rerank, data, fields, extra_body)

        def parse(call: Call, response: Any, meta: Any) -> embeddings.Reranked:
            return embeddings.read_rerank(self._json(response, call), request.documents, call.path)

        call = Call("POST", "/v1/rerank", request_body(request), model=request.model)
        return self._run(_served(self._call(call, parse)))

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
        request = self._request(spec.ImagineRequest, self.imagine, {"prompt": prompt}, fields, extra_body)
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
        request = self._request(spec.VideoRequest, self.video, data, fields, extra_body)
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
        request = self._request(spec.MusicRequest, self.music, data, fields, extra_body)
        return self._run(self._submit("music", request, None, (wait, on_progress, timeout, interval)))

    def job(self, id: str, *, kind: str | None = None) -> _Job:
        """One poll of a job by its id. Its kind ("imagine", "music", "video") comes from the
        log when not given (see `Hooks.job_kind`), so a new kernel picks a job up knowing
        only its id."""
        job_id = str(id)
        kind = kind or self.hooks.job_kind(job_id)
        if kind is None:
            raise InvalidRequest(
                "kind", f"job {job_id!r} is not known here: say its kind, e.g. job({job_id!r}, kind='video')"
            )
        return self._run(self._poll(Job(kind, job_id)))

    def wait(
        self,
        job: Job,
        on_progress: Callable[[Job], Any] | None = None,
        timeout: float = 600,
        interval: float | None = None,
    ) -> _Job:
        """Poll ``job`` until it succeeds (returned) or fails or times out (`JobError`)."""
        return self._run(
            wait_program(self._poll, job, on_progress, timeout, interval or self.options.job_interval)
        )

    # -- requests ---------------------------------------------------------------------

    @staticmethod
    def _request(
        model: type[spec.R],
        method: Callable[..., Any],
        data: dict[str, Any],
        fields: dict[str, Any],
        extra_body: Mapping[str, Any] | None,
    ) -> spec.R:
        """The validated request: the method's arguments, the body fields it may take, and
        ``extra_body`` as it is."""
        return spec.validate(model, Endpoints._body(model, method, data, fields, extra_body))

    @staticmethod
    def _body(
        model: type[spec.RequestModel],
        method: Callable[..., Any],
        data: dict[str, Any],
        fields: dict[str, Any],
        extra_body: Mapping[str, Any] | None,
    ) -> dict[str, Any]:
        """`_request`'s body, not validated yet: a keyword argument the endpoint does not
        take is refused here."""
        if fields:
            spec.refuse_unknown(model, method, fields)
            data.update(fields)
        if extra_body:
            data.update(extra_body)
        return data

    def _conversation(
        self,
        api: str,
        model: str,
        request_model: type[spec.RequestModel],
        body: dict[str, Any],
        typed: Typed | None,
        send: Callable[[Any, Any], Program[Any]],
        tooling: Any = None,
    ) -> Program[Any]:
        """The program of a text endpoint: ``send(request, schema)`` of the body validated
        now; with ``typed``, the rounds of a typed call (`typed_calls.TypedAnswer`), each
        round's body validated as the program makes it; with ``tooling`` (`_tooling`), its
        tool chain's program. Every body's conversation goes through the one redaction first
        (`conversation.outgoing`), every round's too."""
        validate = functools.partial(_validated, request_model, self.api_key)
        if tooling is not None:
            return tooling.program(api, body, validate, send)
        if typed is None:
            return send(validate(body), None)
        return self._typed(api, model, body, typed, validate, send)

    def _tooling(self, fields: dict[str, Any], typed: Typed | None) -> Any:
        """With ``tools=`` of Python functions, the tool chain asked for (its keyword
        arguments taken out of ``fields`` by `_chain`); None for no tools or tools in the
        API's own shape (dicts), which go as body fields."""
        given = fields.get("tools")
        if given is None or (isinstance(given, (list, tuple)) and all(isinstance(t, dict) for t in given)):
            return None
        if typed is not None:
            raise InvalidRequest("tools", "a typed answer (schema=, choices=) cannot go with tools= yet")
        return self._chain(fields)

    def _chain(self, fields: dict[str, Any]) -> Any:
        """The tool chain of ``fields`` (`gatecell.tools`); the clients of the façade have one."""
        raise InvalidRequest("tools", "Python functions as tools run on Gateway and AsyncGateway")

    # -- other runs -----------------------------------------------------------------------

    def programs(self, *, max_retries: int | None = None, hooks: Hooks | None = None) -> Programs:
        """These endpoints returning their programs unrun, for a driver of the caller's own
        (the batch engine's): the same gateway, key, options, router and support, and ``hooks``
        (none by default: such a caller logs and caches in its own way)."""
        options = self.options
        if max_retries is not None:
            options = options.with_retries(max_retries)
        programs = Programs(
            self.base_url + (f"?{self._query}" if self._query else ""),
            self.api_key,
            options=options,
            router=self.router,
            hooks=hooks,
            support=self.support,
        )
        programs.usage_known = self.usage_known
        return programs


def _validated(request_model: type[spec.R], key: Any, body: dict[str, Any]) -> spec.R:
    """The request of ``body`` as it leaves: its conversation redacted, then validated."""
    return spec.validate(request_model, outgoing(body, key))


def _served(program: Program[T]) -> Program[T]:
    """``program``, with a 404 or 405 said as what it means on a path SPEC does not list:
    this gateway does not serve it."""
    try:
        return (yield from program)
    except APIError as error:
        if error.status in (404, 405) and error.path and not error.hint:
            error.hint = f"This gateway does not serve {error.path}"
            error.args = (error._line(),)
        raise


class Programs(
    Endpoints[
        Program[Any],
        Program[Any],
        Program[Any],
        Program[Any],
        Program[Any],
        Program[Any],
        Program[Any],
        Program[Any],
    ]
):
    """Endpoints whose methods return their request programs unrun (see `Endpoints.programs`);
    a driver (`drivers.run`, `drivers.arun`) runs them. Their streams are read synchronously
    (the batch never streams; `AsyncGateway` streams asynchronously)."""

    _chat_stream = ChatStream
    _text_stream = TextStream

    def _run(self, program: Program[Any]) -> Program[Any]:
        return program
