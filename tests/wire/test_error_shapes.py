"""Error answers of third-party gateways (here: LiteLLM's proxy, a FastAPI app) read as one line.

tests/thirdparty runs the same against a real LiteLLM; these pin each shape without it.
"""

from __future__ import annotations

import json

import pytest

from gatecell.wire.transport.errors import api_error
from gatecell.wire.transport.http import Headers, Request, Response, request_id_of

HINT = "Check the API key (GATECELL_API_KEY or OPENAI_API_KEY)"


def error(status: int, body: object, **headers: str):
    request = Request("POST", "http://gw.test/v1/x", Headers())
    answer = Response(status, Headers(headers), request, content=json.dumps(body).encode())
    return api_error(answer, None, "POST", "/v1/x")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"detail": "Not Found"}, "Not Found"),
        (
            {"detail": {"error": "Model id = nope not found on litellm proxy"}},
            "Model id = nope not found on litellm proxy",
        ),
        ({"detail": {"message": "budget exceeded"}}, "budget exceeded"),
        (
            {"detail": [{"loc": ["body", "model"], "msg": "field required"}, {"msg": "bad\nsize"}]},
            "body.model: field required; bad size",
        ),
    ],
)
def test_fastapi_detail_bodies_are_one_line(body, message):
    err = error(404, body)
    assert err.message == message
    assert str(err) == f"404 from POST /v1/x: {message}"


def test_litellm_call_id_is_the_request_id():
    assert request_id_of(Headers({"x-litellm-call-id": "c-1"})) == "c-1"
    assert request_id_of(Headers({"x-litellm-call-id": "c-1", "x-request-id": "r-1"})) == "r-1"
    assert "(request id c-1)" in str(error(400, {"detail": "no"}, **{"x-litellm-call-id": "c-1"}))


@pytest.mark.parametrize(
    ("body", "hinted"),
    [
        ({"error": {"message": "No connected db.", "type": "no_db_connection", "code": "400"}}, True),
        ({"error": {"message": "Invalid API key provided"}}, True),
        ({"detail": "Unauthorized"}, True),
        ({"error": {"message": "max_tokens must be at least 1; the key 'foo' is unknown"}}, False),
        ({"error": {"message": "context too long for this model"}}, False),
    ],
)
def test_an_auth_shaped_400_gets_the_key_hint(body, hinted):
    err = error(400, body)
    assert (err.hint == HINT) is hinted
    assert str(err).endswith(HINT) is hinted
