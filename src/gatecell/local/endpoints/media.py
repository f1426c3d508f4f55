"""Images and speech for the local media models, and the ``/files/<name>`` they are served from."""

from __future__ import annotations

import base64
import re
import time

from starlette.requests import Request
from starlette.responses import Response

from gatecell.wire.apis.spec import ImageRequest, SpeechRequest

from ..errors import Fail, shown
from ..registry import IMAGES, SPEECH
from .common import check_length, json_response, model_endpoint, owner, runtime

_AUDIO_MIME = {
    "wav": "audio/wav",
    "mp3": "audio/mpeg",
    "flac": "audio/flac",
    "opus": "audio/ogg",
    "ogg": "audio/ogg",
    "aac": "audio/aac",
    "pcm": "audio/pcm",
}
_SIZE = re.compile(r"([0-9]{1,5})x([0-9]{1,5})")


def size_of(size: str | None, default: str = "1024x1024") -> tuple[int, int] | None:
    """(width, height) of ``WIDTHxHEIGHT`` in ASCII digits, or None for anything else."""
    match = _SIZE.fullmatch(size or default)
    return (int(match[1]), int(match[2])) if match else None


def file_url(request: Request, name: str) -> str:
    """The absolute URL of a generated file, from the configured public URL or else the address
    the client connected to: never from the request's Host header, which the client chooses."""
    base = runtime(request).config.public_url
    if base is None:
        host, port = request.scope.get("server") or ("127.0.0.1", None)
        host = f"[{host}]" if ":" in host else host
        base = f"{request.scope.get('scheme', 'http')}://{host}" + (f":{port}" if port else "")
    return f"{base}/files/{name}"


@model_endpoint(ImageRequest, IMAGES)
async def images(request: Request, req: ImageRequest, data: dict) -> Response:
    rt = runtime(request)
    check_length("prompt", req.prompt)
    if data.get("n", 1) != 1:
        raise Fail(400, f"n: local-image makes one image per request, got {shown(data.get('n'))}", param="n")
    fmt = data.get("response_format") or "b64_json"
    if fmt not in ("b64_json", "url"):
        raise Fail(400, f"response_format must be b64_json or url, got {shown(fmt)}", param="response_format")
    from ..backends import image

    size = size_of(req.size)
    try:
        if size is None:
            raise ValueError(f"must be WIDTHxHEIGHT, got {shown(req.size)}")
        image.check_size(*size)
    except ValueError as exc:
        raise Fail(400, f"size: {exc}", param="size") from None
    width, height = size
    png = await rt.renders.now(image.render, req.prompt, width, height)
    entry = {"revised_prompt": req.prompt}
    if fmt == "url":
        entry["url"] = file_url(request, rt.media.put(png, "image/png", "png", owner(request)))
    else:
        entry["b64_json"] = base64.b64encode(png).decode()
    return json_response(
        {"created": int(time.time()), "data": [entry], "size": f"{width}x{height}", "output_format": "png"}
    )


@model_endpoint(SpeechRequest, SPEECH)
async def speech(request: Request, req: SpeechRequest, data: dict) -> Response:
    from ..backends import speech as tts

    fmt = data.get("response_format") or "wav"
    if req.voice not in tts.VOICES:  # checked here to name the field
        raise Fail(
            400,
            f"voice must be one of {', '.join(sorted(tts.VOICES))}; got {shown(req.voice)}",
            param="voice",
        )
    if not isinstance(fmt, str) or fmt not in tts.FORMATS:
        raise Fail(
            400,
            f"response_format must be one of {', '.join(sorted(tts.FORMATS))}; got {shown(fmt)}",
            param="response_format",
        )
    try:
        audio = await runtime(request).renders.now(tts.synthesize, req.input, req.voice, fmt)
    except ValueError as exc:
        raise Fail(400, str(exc)) from None
    return Response(audio, media_type=_AUDIO_MIME.get(fmt, "application/octet-stream"))


async def files(request: Request) -> Response:
    """A generated file, for its owner only: to any other key it does not exist (404, not 403)."""
    found = runtime(request).media.get(request.path_params["name"], owner(request))
    if found is None:
        raise Fail(404, "no such file (generated files are kept for a limited number of results)")
    return Response(found.data, media_type=found.mime, headers={"cache-control": "private, max-age=3600"})
