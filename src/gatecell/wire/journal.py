"""The client's side of the store: each call's outcome logged, jobs recorded, the cache
looked up and replayed (see ``docs/store.md``).

Loaded by a client on its first call that logs or asks the cache, never at import: ``import
gatecell`` and ``Gateway()`` load no SQLite. Everything here runs on the caller's path, so
it only gathers references (`gatecell.store.Store.log` returns in about a microsecond; the
JSON, redaction and hashing happen in the store's writer thread).

**Which gateway.** The log names a gateway by its root address, except the local gateway
(the one embedded in this process, or ``gatecell lab``'s), which is ``local``: its port and
key change at every start, and its jobs (kept on disk, owned through a stable key) and the
answers it gave stay valid across restarts. The key itself is never written: it is handed
to the store as a secret to mask.

**The cache** answers the text APIs only (`apis.CACHEABLE`): a request identical to a
logged one gets the logged reply, parsed by the very code that parses a gateway's answer,
so a cached reply has the types of a fresh one (a `ChatCompletion`, a `Reply`, a stream
with one fragment). A reply logged from a stream kept no body; it is rebuilt in the
endpoint's own shape (WIRE-NOTES) from its text, reasoning and usage.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

import httpx

from gatecell import store

from .apis import CACHEABLE, api_of
from .context import CallContext, notebook_of
from .errors import InvalidRequest
from .exchange import Call, Outcome
from .results import Audio, ImageResult, Job, Reply, ResponseMeta
from .schemas import ChatCompletion
from .streams import _Stream

if TYPE_CHECKING:
    from .client import _Endpoints

__all__ = ["Journal", "LOCAL", "is_local"]

LOCAL = "local"
_JSON_HEADERS = {"content-type": "application/json"}
_EMPTY = CallContext()


def is_local(base_url: str) -> bool:
    """Whether ``base_url`` is the local gateway: the one ``gatecell lab`` handed down
    (``GATECELL_LOCAL_URL``), or the one embedded in this process."""
    import sys

    from gatecell.connect import local_url

    from .settings import root_url

    root = root_url(base_url)
    embedded = sys.modules.get("gatecell.local.embedded")  # loaded only when it was started
    running = getattr(embedded, "_current", None)
    return root == local_url() or (running is not None and root == running.base_url)


class Journal:
    """One client's log: ``record`` each outcome, ``lookup`` the cache, ``kind_of`` a job."""

    def __init__(self, client: _Endpoints[Any, Any, Any, Any, Any, Any, Any, Any]) -> None:
        self._client = client
        self.store = store.default_store(log=True)  # the client decides whether to write
        self.gateway = LOCAL if is_local(client.base_url) else client.base_url

    # -- the cache ----------------------------------------------------------------------

    @staticmethod
    def wanted(call: Call, cache: bool, context: CallContext) -> bool:
        """Whether to ask the cache for ``call``: the context's say, else the client's."""
        asked = cache if context.cache is None else context.cache
        return asked and call.method == "POST" and api_of(call.path) in CACHEABLE

    def lookup(self, call: Call) -> tuple[str, store.Answer | None]:
        """The call's cache key, and the logged answer to it (None when there is none)."""
        key = store.cache_key(call.path, call.model, call.body, self.gateway)
        return key, self.store.lookup(key)

    def replayed(self, call: Call, answer: store.Answer) -> tuple[httpx.Response, ResponseMeta]:
        """A response as the gateway would send it, holding the logged answer: no request."""
        started = time.perf_counter()
        body = answer.response if answer.response is not None else _rebuilt(call, answer)
        request = httpx.Request(call.method, self._client.base_url + call.path)
        response = httpx.Response(
            200, headers=_JSON_HEADERS, content=json.dumps(body).encode(), request=request
        )
        meta = ResponseMeta(call.path, call.model, 200, 0.0, request_id=answer.request_id, cached=True)
        meta.latency = time.perf_counter() - started
        return response, meta

    # -- jobs ---------------------------------------------------------------------------

    def kind_of(self, job_id: str) -> str:
        """The kind of a job this client's gateway ran, from the log: a job is picked up by
        its id alone, in any kernel."""
        found = self.store.job(job_id, gateway=self.gateway)
        if found is not None:
            return found.kind
        elsewhere = self.store.job(job_id)
        if elsewhere is not None:
            raise InvalidRequest(
                "id",
                f"job {job_id!r} went to {elsewhere.gateway or 'another gateway'}, not to this client's "
                f"({self.gateway}): poll it with a client of that gateway",
            )
        raise InvalidRequest(
            "kind", f"job {job_id!r} is not in the log: say its kind, e.g. job({job_id!r}, kind='video')"
        )

    # -- the log ------------------------------------------------------------------------

    def record(self, outcome: Outcome) -> None:
        """Log one outcome: an exchange, a job's news, or both (a submit)."""
        call, result, meta, error = outcome.call, outcome.result, outcome.meta, outcome.error
        context = outcome.context or _EMPTY
        secrets = (self._client.api_key,)
        if isinstance(result, Job):
            self._job(call, result, context, secrets, outcome.at)
        if not call.logged:
            return
        text = reasoning = media = media_type = response = None
        usage: Any = None
        latency = meta.latency if meta is not None else None
        if isinstance(result, _Stream):
            text, reasoning, usage = result.text, result.reasoning, result._decoder.usage
            if outcome.at is not None:  # a stream's time runs to its end, not to its headers
                latency = time.time() - outcome.at
        elif isinstance(result, ChatCompletion):
            message = result.choices[0].message if result.choices else None
            extra = (message.model_extra or {}) if message is not None else {}
            text, usage = result.text, result.usage
            reasoning = extra.get("reasoning_content") or extra.get("reasoning")
            response = outcome.body
        elif isinstance(result, Reply):
            text, reasoning, usage, response = result.text, result.reasoning, result.usage, outcome.body
        elif isinstance(result, Audio):
            media, media_type = result.data, result.mime
        elif isinstance(result, ImageResult):
            shown = next((image for image in result.images if image.loaded), None)
            if shown is not None:
                media, media_type = shown.data, shown.mime
            response = outcome.body
        elif result is not None:
            response = outcome.body
        self.store.log(
            call.path,
            call.model,
            call.body,
            response=response,
            text=text,
            reasoning=reasoning if isinstance(reasoning, str) else None,
            usage=usage,
            latency=latency,
            status=meta.status if meta is not None else getattr(error, "status", None),
            error=str(error) if error is not None else None,
            request_id=meta.request_id if meta is not None else getattr(error, "request_id", None),
            conversation=context.conversation,
            notebook=notebook_of(context),
            gateway=self.gateway,
            cached=meta is not None and meta.cached,
            partial=outcome.partial,
            cache_key=outcome.cache_key,
            media=media,
            media_type=media_type,
            log_media=self._client.log_media,
            secrets=secrets,
            at=outcome.at,
        )

    def _job(
        self, call: Call, job: Job, context: CallContext, secrets: tuple[Any, ...], at: float | None
    ) -> None:
        """A submit records the job; a poll what is new about it."""
        submitted = call.method == "POST"
        self.store.record_job(
            job.kind,
            job.id,
            gateway=self.gateway,
            model=call.model if submitted else None,
            prompt=_prompt(call.body) if submitted else None,
            state=job.status,
            progress=job.progress,
            error=job.error,
            notebook=notebook_of(context) if submitted else None,
            body=job.raw,
            secrets=secrets,
            at=at,
        )


def _prompt(body: bytes | None) -> str | None:
    try:
        prompt = json.loads(body or b"null")
    except ValueError:
        return None
    prompt = prompt.get("prompt") if isinstance(prompt, dict) else None
    return prompt if isinstance(prompt, str) else None


def _rebuilt(call: Call, answer: store.Answer) -> dict[str, Any]:
    """A reply of the endpoint's own shape (WIRE-NOTES) from a streamed reply's text,
    reasoning and usage, for the parser of that endpoint."""
    text, reasoning, usage = answer.text or "", answer.reasoning, answer.usage
    model, rid = answer.model or call.model or "", answer.request_id or ""
    api = api_of(call.path)
    if api == "messages":
        blocks = [{"type": "thinking", "thinking": reasoning}] if reasoning else []
        content = [*blocks, {"type": "text", "text": text}]
        return {
            "id": rid,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "usage": usage,
        }
    if api == "generate-content":
        parts = [{"text": reasoning, "thought": True}] if reasoning else []
        candidate = {"content": {"role": "model", "parts": [*parts, {"text": text}]}, "index": 0}
        return {"candidates": [candidate], "usageMetadata": usage, "modelVersion": model}
    if api == "responses":
        summary = [{"type": "summary_text", "text": reasoning}] if reasoning else []
        output = [{"type": "reasoning", "summary": summary}] if reasoning else []
        output.append(
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}
        )
        return {
            "id": rid,
            "object": "response",
            "status": "completed",
            "model": model,
            "output": output,
            "usage": usage,
        }
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if reasoning:
        message["reasoning_content"] = reasoning
    return {
        "id": rid,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": None}],
        "usage": usage,
    }
