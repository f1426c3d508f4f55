"""Images and speech for the local media models, and the ``/files/<name>`` they are served from."""

from __future__ import annotations

import base64
import time

from starlette.requests import Request
from starlette.responses import Response

from gatecell.wire.schemas import ImageRequest, SpeechRequest

from ..errors import Fail
from ..registry import IMAGES, SPEECH
from ..render import render_in_thread
from .common import json_response, model_endpoint, runtime

_AUDIO_MIME = {
    "wav": "audio/wav",
    "mp3": "audio/mpeg",
    "flac": "audio/flac",
    "opus": "audio/ogg",
    "ogg": "audio/ogg",
    "aac": "audio/aac",
    "pcm": "audio/pcm",
}


def size_of(size: str | None, default: str = "1024x1024") -> tuple[int, int]:
    width, _, height = (size or default).partition("x")
    return int(width), int(height)


def file_url(request: Request, name: str) -> str:
    return f"{str(request.base_url).rstrip('/')}/files/{name}"


@model_endpoint(ImageRequest, IMAGES)
async def images(request: Request, req: ImageRequest, data: dict) -> Response:
    rt = runtime(request)
    if data.get("n", 1) != 1:
        raise Fail(400, f"n: local-image makes one image per request, got {data.get('n')!r}", param="n")
    fmt = data.get("response_format") or "b64_json"
    if fmt not in ("b64_json", "url"):
        raise Fail(400, f"response_format must be b64_json or url, got {fmt!r}", param="response_format")
    width, height = size_of(req.size)
    from ..backends import image

    try:
        image.check_size(width, height)
    except ValueError as exc:
        raise Fail(400, f"size: {exc}", param="size") from None
    png = await render_in_thread(image.render, req.prompt, width, height)
    entry = {"revised_prompt": req.prompt}
    if fmt == "url":
        entry["url"] = file_url(request, rt.media.put(png, "image/png", "png"))
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
            400, f"voice must be one of {', '.join(sorted(tts.VOICES))}; got {req.voice!r}", param="voice"
        )
    if not isinstance(fmt, str) or fmt not in tts.FORMATS:
        raise Fail(
            400,
            f"response_format must be one of {', '.join(sorted(tts.FORMATS))}; got {fmt!r}",
            param="response_format",
        )
    try:
        audio = await render_in_thread(tts.synthesize, req.input, req.voice, fmt)
    except ValueError as exc:
        raise Fail(400, str(exc)) from None
    return Response(audio, media_type=_AUDIO_MIME.get(fmt, "application/octet-stream"))


async def files(request: Request) -> Response:
    found = runtime(request).media.get(request.path_params["name"])
    if found is None:
        raise Fail(404, "no such file (generated files are kept for a limited number of results)")
    data, mime = found
    return Response(data, media_type=mime, headers={"cache-control": "private, max-age=3600"})
