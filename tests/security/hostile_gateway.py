"""A gateway on loopback that attacks its client's browser with everything it sends.

It speaks enough of SPEC (models, chat and responses, streamed or not, images, speech,
video, imagine and music jobs) for every magic and panel to run against it, and puts a
payload in each place a gateway controls: model ids and owners, reply texts and reasoning
summaries, request-id headers, Content-Type headers of media, job ids, job errors, error
messages, unrecognised bodies. Every payload that runs records itself in the page:
``window.__pwned`` becomes a list of the places that ran, so a browser test can say which.

The replies also carry what must keep working: a heading, a table and a code block
(`CONTROL_HEADING` and friends), so a test can tell "rendered and inert" from "not
rendered at all".
"""

from __future__ import annotations

import base64
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

KEY = "sk-hostile-" + "0123456789abcdef" * 2


def hit(where: str) -> str:
    """JavaScript that records ``where`` in the page when it runs."""
    return f"window.__pwned=(window.__pwned||[]).concat('{where}')"


def img(where: str) -> str:
    """An attribute break-out followed by an image whose error handler runs ``hit(where)``."""
    return f'"\'><img src=x onerror="{hit(where)}">'


CONTROL_HEADING = "Control heading"
CONTROL_CODE = "def control():"

REPLY = f"""# {CONTROL_HEADING}

| column | value |
|--------|------:|
| cell {img("table-cell")} | 1 |

```python
{CONTROL_CODE}
    return "<script>{hit("code-block")}</script>"
```

{img("reply-raw-img")} <script>{hit("reply-script")}</script>

<svg onload="{hit("reply-svg")}"></svg>
<iframe srcdoc="<script>parent.{hit("reply-iframe")}</script>"></iframe>
<details open ontoggle="{hit("reply-details")}"><summary>toggle</summary>x</details>

[a link](javascript:{hit("md-link")}) [entity](&#106;avascript:{hit("md-entity")})
[tab](java\tscript:{hit("md-tab")}) ![image](javascript:{hit("md-image")})
![attr](x" onerror="{hit("md-image-attr")}) <javascript:{hit("autolink")}>
[data](data:text/html;base64,{base64.b64encode(f"<script>{hit('data-url')}</script>".encode()).decode()})
<a href="javascript:{hit("raw-a")}">raw anchor</a>
&lt;img src=x onerror="{hit("entity-html")}"&gt;

[ref][r]

[r]: javascript:{hit("ref-link")}
"""

REASONING = f"thinking {img('reasoning')} <script>{hit('reasoning-script')}</script>"
MODEL_ID = f"hostile-model{img('model-id')}"
OWNER = f"owner{img('owner')}"
REQUEST_ID = f"req{img('request-id')}"  # a header value: no line breaks, anything else goes
ERROR = f"denied {img('error-message')} <script>{hit('error-script')}</script>"
AUDIO_TYPE = f'audio/wav"><img src=x onerror="{hit("audio-type")}">'
IMAGE_TYPE = f'image/png"><img src=x onerror="{hit("image-type")}">'
PARAM_TYPE = f'audio/wav; codecs="><img src=x onerror={hit("type-param")}>"'
VIDEO_JOB = "x/../../../../escaped"
IMAGINE_JOB = f"job{img('job-id')}"
MUSIC_JOB = f"tune{img('music-id')}"
UNRECOGNISED = {"result": f"```\n</code></pre>{img('unrecognised')}\n```", "note": REPLY[:80]}

# Cells that send every magic to this gateway (after `%config Gatecell.base_url = ...`).
CELLS = [
    "%%chat\nshow me",
    "%chat --no-stream again",
    "%%chat --footer\nwith provenance",
    "%%reason\nthink",
    "%%reason --no-stream --footer\nthink",
    "%gatecell models",
    "%gatecell history",
    "%gatecell config",
    "%image -m hostile-image a picture",
    "%image -m hostile-unrecognised a picture",
    "%speak -m hostile-tts hello",
    "%speak -m hostile-tts -v params hello",
    "%imagine a picture",
    "_",  # the finished job, displayed again
    "r = %chat hi",
    "r",  # the reply, displayed again
    "%video -m hostile-video a clip",
    "%music a tune",
    "%chat -m hostile-error hi",
    "%gatecell explain --show-prompt",  # the error's message goes into a prompt, shown
    "%%chat --cells 3 --show-prompt --code\nshow me",  # the replies above, and code out of this one
]

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
WAV = b"RIFF\x24\x08\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00\x40\x1f\x00\x00\x80>\x00\x00"
WAV += b"\x02\x00\x10\x00data\x00\x08\x00\x00" + b"\x00" * 2048
MP4 = b"\x00\x00\x00\x18ftypmp42\x00\x00\x00\x00mp42isom" + b"\x00" * 4000
JUNK = b"\x13\x37 not a signature anyone knows " * 40

MODELS = [
    {"id": "hostile-chat", "object": "model", "owned_by": OWNER},
    {"id": "hostile-error", "object": "model", "owned_by": "x"},
    {"id": "hostile-image", "object": "model", "owned_by": "x", "sizes": [img("size"), "64x64"]},
    {"id": "hostile-unrecognised", "object": "model", "owned_by": "x"},
    {"id": "hostile-tts", "object": "model", "owned_by": "x", "voices": [{"id": img("voice")}, "alloy"]},
    {"id": "hostile-video", "object": "model", "owned_by": "x"},
    {
        "id": MODEL_ID,
        "object": "model",
        "owned_by": OWNER,
        "supported_endpoints": ["/v1/chat/completions", f"/v1/x{img('endpoint')}"],
    },
]


class HostileGateway(ThreadingHTTPServer):
    """The payloads are attributes, so that a test can start one with payloads of its own
    (``start(request_id=...)``): a key in a request id, terminal escapes in a reply."""

    daemon_threads = True
    pace = 0.001  # seconds between stream events; the panel tests slow it down to watch
    request_id = REQUEST_ID
    reply = REPLY
    models = MODELS
    error = ERROR
    escaped = False  # True: every character of every string in a JSON body as a \u escape

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: HostileGateway
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("x-request-id", self.server.request_id)
        self.end_headers()
        self.wfile.write(body)

    def _json(self, body: Any, status: int = 200) -> None:
        self._send(
            status, (_escaped(body) if self.server.escaped else json.dumps(body)).encode(), "application/json"
        )

    def _events(self, events: list[tuple[str | None, Any]]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("x-request-id", self.server.request_id)
        self.end_headers()
        for name, data in events:
            event = (f"event: {name}\n" if name else "") + f"data: {json.dumps(data)}\n\n"
            raw = event.encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(raw), raw))
            self.wfile.flush()
            time.sleep(self.server.pace)
        done = b"data: [DONE]\n\n"
        self.wfile.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(done), done))

    def do_GET(self) -> None:
        path = self.path.split("?")[0]
        if path == "/v1/models":
            return self._json({"object": "list", "data": self.server.models})
        if path == "/files/junk-image":
            return self._send(200, JUNK, IMAGE_TYPE)
        if path == "/files/png":
            return self._send(200, PNG, IMAGE_TYPE)
        if path.endswith("/content"):
            return self._send(200, MP4, f"video/mp4{img('video-type')}")
        if path.startswith("/musicjob/fetch/"):
            return self._json({"code": "success", "data": {"status": "FAILURE", "failReason": ERROR}})
        # a video poll, wherever the job id led the path
        return self._json({"id": VIDEO_JOB, "object": "video", "status": "completed", "progress": 100})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        path = self.path.split("?")[0]
        model = body.get("model")
        if model == "hostile-error":
            return self._json({"error": {"message": self.server.error, "type": "invalid_request_error"}}, 400)
        if path == "/v1/chat/completions":
            return self._chat(body)
        if path == "/v1/responses":
            return self._responses(body)
        if path == "/v1/images/generations":
            if model == "hostile-unrecognised":
                return self._json(UNRECOGNISED)
            base = self.server.base_url
            return self._json({"data": [{"url": f"{base}/files/junk-image"}, {"url": f"{base}/files/png"}]})
        if path == "/v1/audio/speech":
            if body.get("voice") == "params":
                return self._send(200, WAV, PARAM_TYPE)
            return self._send(200, JUNK, AUDIO_TYPE)
        if path == "/v1/videos":  # done at once: no poll to wait for
            return self._json({"id": VIDEO_JOB, "object": "video", "status": "completed", "progress": 100})
        if path == "/imgjob/submit/imagine":
            png = f"{self.server.base_url}/files/png"
            return self._json({"code": 1, "result": IMAGINE_JOB, "status": "SUCCESS", "imageUrl": png})
        if path == "/musicjob/submit/music":
            return self._json({"code": "success", "message": "", "data": MUSIC_JOB})
        return self._json({"error": {"message": f"no route {ERROR}"}}, 404)

    def _chat(self, body: dict[str, Any]) -> None:
        usage = {"prompt_tokens": 3, "completion_tokens": 40, "total_tokens": 43}
        reply = self.server.reply
        if not body.get("stream"):
            choice = {"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}
            return self._json({"id": "c1", "model": MODEL_ID, "usage": usage, "choices": [choice]})
        pieces = [reply[i : i + 24] for i in range(0, len(reply), 24)]
        chunks = [
            {"id": "c1", "model": MODEL_ID, "choices": [{"index": 0, "delta": {"content": p}}]}
            for p in pieces
        ]
        chunks.append({"id": "c1", "model": MODEL_ID, "choices": [], "usage": usage})
        self._events([(None, c) for c in chunks])

    def _responses(self, body: dict[str, Any]) -> None:
        response = {
            "id": "r1",
            "object": "response",
            "status": "completed",
            "model": MODEL_ID,
            "output": [
                {"type": "reasoning", "summary": [{"type": "summary_text", "text": REASONING}]},
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": REPLY}]},
            ],
            "usage": {"input_tokens": 3, "output_tokens": 40, "total_tokens": 43},
        }
        if not body.get("stream"):
            return self._json(response)
        summary = "response.reasoning_summary_text.delta"
        events: list[tuple[str | None, Any]] = [(summary, {"type": summary, "delta": REASONING})]
        events += [
            ("response.output_text.delta", {"type": "response.output_text.delta", "delta": REPLY[i : i + 24]})
            for i in range(0, len(REPLY), 24)
        ]
        events.append(("response.completed", {"type": "response.completed", "response": response}))
        self._events(events)


def _escaped(value: Any) -> str:
    """JSON whose strings are all ``\\uXXXX`` escapes: valid, and no text of it readable as it is."""
    if isinstance(value, str):
        return '"' + "".join(f"\\u{ord(c):04x}" for c in value) + '"'
    if isinstance(value, dict):
        return "{" + ",".join(f"{_escaped(k)}:{_escaped(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_escaped(v) for v in value) + "]"
    return json.dumps(value)


def start(**payloads: Any) -> HostileGateway:
    """A hostile gateway on a free loopback port; ``payloads`` replace the class's own."""
    server = HostileGateway(("127.0.0.1", 0), _Handler)
    for name, value in payloads.items():
        setattr(server, name, value)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server
