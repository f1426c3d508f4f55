"""GET /v1/models: the local models, merged with the upstream gateway's list when there is one."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from ..errors import Fail, shown
from ..registry import MODELS, model_entry
from .common import json_response, runtime


async def list_models(request: Request) -> Response:
    rt = runtime(request)
    entries = [model_entry(m) for m in MODELS.values() if rt.serves(m)]
    if rt.upstream is not None:
        entries += [m for m in await rt.upstream.models() if m["id"] not in MODELS]
    return json_response({"object": "list", "data": entries})


async def get_model(request: Request) -> Response:
    rt = runtime(request)
    name = request.path_params["name"]
    if name in MODELS and rt.serves(MODELS[name]):
        return json_response(model_entry(MODELS[name]))
    if rt.upstream is not None:  # from the list: no other model path goes upstream
        entry = next((m for m in await rt.upstream.models() if m["id"] == name), None)
        if entry is not None:
            return json_response(entry)
    raise Fail(404, f"model {shown(name)} not found", param="model", code="model_not_found")
