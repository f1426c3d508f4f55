"""The local gateway takes content parts on every text API and says what it got.

Through the openai, anthropic and google-genai SDKs (what their users write) and gatecell's
own client: how many pictures, format, size, dominant colours, chart or photo; a document's
type and length; the same answer for the same bytes. A malformed part is a 400 in the API's
own error format.
"""

from __future__ import annotations

import base64
import io

import anthropic
import httpx
import matplotlib
import numpy as np
import pytest
from google import genai
from google.genai import types

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from PIL import Image

from gatecell.gateway import Gateway
from gatecell.wire.apis.attachments import attachment_of


def _chart() -> bytes:
    fig, ax = plt.subplots(figsize=(4, 3), dpi=100)
    x = np.linspace(0, 6, 100)
    ax.plot(x, np.sin(x), color="tab:blue", linewidth=3)
    ax.plot(x, np.cos(x), color="tab:orange", linewidth=3)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    return buffer.getvalue()


def _photo() -> bytes:
    """A 'photo': smooth green and brown fields with noise (many colours, no plain background)."""
    rng = np.random.default_rng(3)
    y = np.linspace(0, 1, 300)[:, None, None]
    field = np.concatenate(
        [np.full((300, 400, 1), 60), np.full((300, 400, 1), 140), np.full((300, 400, 1), 50)], 2
    )
    earth = np.concatenate(
        [np.full((300, 400, 1), 140), np.full((300, 400, 1), 90), np.full((300, 400, 1), 45)], 2
    )
    pixels = field * (1 - y) + earth * y + rng.normal(0, 12, (300, 400, 3))
    buffer = io.BytesIO()
    Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8)).save(buffer, format="JPEG", quality=90)
    return buffer.getvalue()


def _pdf() -> bytes:
    fig, ax = plt.subplots()
    ax.set_title("Quarterly figures")
    buffer = io.BytesIO()
    fig.savefig(buffer, format="pdf")
    plt.close(fig)
    return buffer.getvalue()


CHART, PHOTO, PDF = _chart(), _photo(), _pdf()


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_openai_chat_with_a_chart_and_a_photo(client):
    content = [
        {"type": "text", "text": "What do these show?"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{_b64(CHART)}"}},
        {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{_b64(PHOTO)}", "detail": "low"}},
    ]
    reply = client.chat.completions.create(
        model="local-chat", messages=[{"role": "user", "content": content}]
    )
    text = reply.choices[0].message.content
    assert text.startswith(
        "You asked: “What do these show? [picture 1] [picture 2]”\n\nI received 2 pictures."
    )
    chart, photo = (line for line in text.splitlines() if line.startswith("- picture"))
    assert chart.startswith(f"- picture 1: PNG 400x300, {round(len(CHART) / 1024)} KB; mostly white")
    assert "blue" in chart and "orange" in chart and "looks like a chart or a diagram" in chart
    assert photo.startswith("- picture 2: JPEG 400x300") and "looks like a photo" in photo
    assert "green" in photo and "brown" in photo
    again = client.chat.completions.create(
        model="local-chat", messages=[{"role": "user", "content": content}]
    )
    assert again.choices[0].message.content == text  # deterministic: the same bytes, the same words


def test_openai_chat_stream_and_a_pdf_file_part(client):
    content = [
        {"type": "text", "text": "Summarise this."},
        {
            "type": "file",
            "file": {"filename": "q.pdf", "file_data": f"data:application/pdf;base64,{_b64(PDF)}"},
        },
    ]
    stream = client.chat.completions.create(
        model="local-chat", messages=[{"role": "user", "content": content}], stream=True
    )
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    assert "I received 1 document." in text
    assert (
        f"- document 1: PDF, {round(len(PDF) / 1024)} KB: 1 page, " in text and "characters of text" in text
    )


def test_anthropic_messages_with_image_and_document_blocks(local_gateway):
    with anthropic.Anthropic(
        base_url=local_gateway.base_url, api_key=local_gateway.api_key.reveal(), max_retries=0
    ) as claude:
        message = claude.messages.create(
            model="local-chat",
            max_tokens=400,
            messages=[
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/png", "data": _b64(CHART)},
                        },
                        {
                            "type": "document",
                            "source": {"type": "text", "media_type": "text/plain", "data": "a note"},
                        },
                        {"type": "image", "source": {"type": "url", "url": "https://pictures.invalid/x.png"}},
                        {"type": "text", "text": "Compare them."},
                    ],
                }
            ],
        )
    text = message.content[0].text
    assert "I received 2 pictures." in text
    assert (
        "- picture 2: by URL, https://pictures.invalid/x.png (not fetched: this gateway works offline)"
        in text
    )
    assert "You asked: “[picture 1] a note [picture 2] Compare them.”" in text  # a text document is text


def test_google_genai_inline_data(local_gateway):
    gemini = genai.Client(
        api_key=local_gateway.api_key.reveal(),
        http_options=types.HttpOptions(base_url=local_gateway.base_url),
    )
    reply = gemini.models.generate_content(
        model="local-chat",
        contents=[types.Part.from_bytes(data=PHOTO, mime_type="image/jpeg"), "What is in this photo?"],
    )
    assert "I received 1 picture." in reply.text and "- picture 1: JPEG 400x300" in reply.text


def test_openai_responses_input_image(client):
    reply = client.responses.create(
        model="local-reasoner",
        input=[
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "Describe."},
                    {"type": "input_image", "image_url": f"data:image/png;base64,{_b64(CHART)}"},
                ],
            }
        ],
    )
    assert "I received 1 picture." in reply.output_text
    summary = reply.output[0].summary[0].text
    assert "It came with pictures or documents, so I measured them." in summary


def test_gatecell_client_a_figure_then_a_follow_up(local_gateway):
    fig, ax = plt.subplots(figsize=(3, 2), dpi=100)
    ax.plot([0, 1, 2], [2, 0, 1])
    picture = attachment_of(fig)
    plt.close(fig)
    with Gateway(local_gateway.base_url, local_gateway.api_key) as gw:
        first = [{"role": "user", "content": ["What does this show?", picture]}]
        for api in ("chat", "messages", "generate-content"):
            answer = gw.converse(api, "local-chat", first).text
            assert "- picture 1: PNG 300x200" in answer, api
        follow_up = [
            *first,
            {"role": "assistant", "content": answer},
            {"role": "user", "content": "Any trend?"},
        ]
        later = gw.converse("chat", "local-chat", follow_up).text
    assert "Earlier in this conversation you sent 1 picture." in later


# -- malformed parts: a 400 in the API's own format --------------------------------------------------


def _post(gw, path: str, body: dict) -> httpx.Response:
    key = gw.api_key.reveal()
    headers = {"authorization": f"Bearer {key}", "x-goog-api-key": key}
    return httpx.post(f"{gw.base_url}{path}", json=body, headers=headers, timeout=30)


BAD_URL = {"type": "image_url", "image_url": {"url": "data:image/png;base64,not*base64"}}


@pytest.mark.parametrize(
    ("path", "body", "says"),
    [
        (
            "/v1/chat/completions",
            {"model": "local-chat", "messages": [{"role": "user", "content": [BAD_URL]}]},
            "content.0.image_url.url: is not valid base64",
        ),
        (
            "/v1/chat/completions",
            {
                "model": "local-chat",
                "messages": [
                    {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:,x"}}]}
                ],
            },
            "http(s) URL or a data:<type>;base64,<data> URL",
        ),
        (
            "/v1/chat/completions",
            {"model": "local-chat", "messages": [{"role": "user", "content": [{"type": "hologram"}]}]},
            "type must be one of text, image_url, file",
        ),
        (
            "/v1/messages",
            {
                "model": "local-chat",
                "max_tokens": 5,
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "image",
                                "source": {"type": "base64", "media_type": "image/png", "data": "%%%"},
                            }
                        ],
                    }
                ],
            },
            "content.0.source.data: is not valid base64",
        ),
        (
            "/v1/messages",
            {
                "model": "local-chat",
                "max_tokens": 5,
                "messages": [{"role": "user", "content": [{"type": "tool_use", "id": "t"}]}],
            },
            "local-chat reads text, pictures and documents, not 'tool_use' parts",
        ),
        (
            "/v1beta/models/local-chat:generateContent",
            {"contents": [{"parts": [{"inline_data": {"mime_type": "image/png", "data": "~~~"}}]}]},
            "content.0.inline_data.data: is not valid base64",
        ),
        (
            "/v1/responses",
            {
                "model": "local-reasoner",
                "input": [
                    {
                        "role": "user",
                        "content": [{"type": "input_image", "image_url": "data:image/png;base64,!!"}],
                    }
                ],
            },
            "content.0.image_url: is not valid base64",
        ),
    ],
    ids=[
        "bad-base64",
        "bad-data-url",
        "unknown-type",
        "messages-base64",
        "messages-unknown",
        "gc-base64",
        "responses-base64",
    ],
)
def test_a_malformed_part_is_a_400_in_the_apis_format(local_gateway, path, body, says):
    r = _post(local_gateway, path, body)
    assert r.status_code == 400, r.text
    error = r.json()
    if path.startswith("/v1/messages"):
        assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
        message = error["error"]["message"]
    elif path.startswith("/v1beta"):
        assert error["error"]["status"] == "INVALID_ARGUMENT"
        message = error["error"]["message"]
    else:
        assert error["error"]["type"] == "invalid_request_error"
        message = error["error"]["message"]
    assert says in message


def test_a_picture_that_does_not_decode_is_said_so(client):
    content = [
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{_b64(b'not a png at all')}"}}
    ]
    text = client.chat.completions.create(model="local-chat", messages=[{"role": "user", "content": content}])
    assert "which I could not decode as a picture" in text.choices[0].message.content


def test_a_plain_picture_and_one_too_large_to_measure(client):
    def png(image: Image.Image) -> dict:
        buffer = io.BytesIO()
        image.save(buffer, format="PNG")
        return {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{_b64(buffer.getvalue())}"}}

    content = [png(Image.new("RGB", (40, 30), "red")), png(Image.new("L", (5000, 4000), 255))]
    text = client.chat.completions.create(model="local-chat", messages=[{"role": "user", "content": content}])
    lines = text.choices[0].message.content.splitlines()
    assert lines[-2].endswith("mostly red (100%); it is one plain colour")
    assert lines[-1].startswith("- picture 2: PNG 5000x4000, ")
    assert lines[-1].endswith("(too large to measure: over 16,000,000 pixels)")  # never decoded
