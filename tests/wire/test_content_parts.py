"""Content parts on the wire: each API's shapes byte for byte, as the fault server received
them; URLs passed on; bad parts refused before sending; a refusing model recognised; the
log and the cache of requests that carry pictures.

Requests go through the endpoint methods with content already made parts
(`conversation.parts`), and through `Gateway.converse`, which makes them (`for_api`).
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pytest
from PIL import Image

from gatecell import store
from gatecell.store.keys import gateway_address
from gatecell.store.queries import chat_messages
from gatecell.wire.apis.attachments import Attachment, attachment_of, load, size_text
from gatecell.wire.apis.conversation import content_summary, for_api, neutral, parts, to_responses
from gatecell.wire.transport.errors import TEXT_ONLY, APIError, InvalidRequest, refuses_content

QUESTION = "What does this plot show?"


def _compact(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


@pytest.fixture(scope="module")
def figure() -> Attachment:
    fig, ax = plt.subplots(figsize=(3.2, 2.4), dpi=100)
    ax.plot([0, 1, 2, 3, 4], [0, 1, 0.3, 1, 0])
    found = attachment_of(fig)
    plt.close(fig)
    return found


@pytest.fixture(scope="module")
def pdf() -> Attachment:
    fig, ax = plt.subplots()
    ax.set_title("Findings")
    buffer = io.BytesIO()
    fig.savefig(buffer, format="pdf")
    plt.close(fig)
    return Attachment(
        "document", "application/pdf", buffer.getvalue(), name="findings.pdf", description="PDF"
    )


def _png_size(b64: str) -> tuple[int, int]:
    return Image.open(io.BytesIO(base64.b64decode(b64))).size


def _sent(fault, gw) -> list:
    return fault.seen(gw.token)


# -- each API's shapes, byte for byte -----------------------------------------------------------


def test_chat_parts_byte_for_byte(make, fault, figure, pdf):
    gw = make("ok")
    content = parts("chat", [QUESTION, figure, pdf])
    gw.chat("m", [{"role": "user", "content": content}])
    url = f"data:image/png;base64,{figure.base64()}"
    expected = {
        "model": "m",
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": QUESTION},
                    {"type": "image_url", "image_url": {"url": url, "detail": "auto"}},
                    {
                        "type": "file",
                        "file": {
                            "filename": "findings.pdf",
                            "file_data": f"data:application/pdf;base64,{pdf.base64()}",
                        },
                    },
                ],
            }
        ],
        "stream": False,
    }
    (request,) = _sent(fault, gw)
    assert request.body == _compact(expected)
    assert _png_size(url.partition(",")[2]) == (320, 240)  # decodable, the figure's size


def test_messages_blocks_byte_for_byte(make, fault, figure, pdf):
    gw = make("ok")
    gw.messages("claude", [{"role": "user", "content": parts("messages", [QUESTION, figure, pdf])}])
    expected = {
        "model": "claude",
        "max_tokens": 1024,
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": QUESTION},
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": figure.base64()},
                    },
                    {
                        "type": "document",
                        "source": {"type": "base64", "media_type": "application/pdf", "data": pdf.base64()},
                    },
                ],
            }
        ],
        "stream": False,
    }
    (request,) = _sent(fault, gw)
    assert request.body == _compact(expected)
    assert _png_size(request.json()["messages"][0]["content"][1]["source"]["data"]) == (320, 240)


def test_generate_content_parts_byte_for_byte(make, fault, figure):
    gw = make("ok")
    contents = [{"role": "user", "parts": parts("generate-content", [QUESTION, figure])}]
    gw.generate_content("gem", contents)
    expected = {
        "contents": [
            {
                "role": "user",
                "parts": [
                    {"text": QUESTION},
                    {"inline_data": {"mime_type": "image/png", "data": figure.base64()}},
                ],
            }
        ]
    }
    (request,) = _sent(fault, gw)
    assert request.path == "/v1beta/models/gem:generateContent"
    assert request.body == _compact(expected)


def test_responses_parts_byte_for_byte(make, fault, figure, pdf):
    gw = make("ok")
    gw.responses("reasoner", [{"role": "user", "content": parts("responses", [QUESTION, figure, pdf])}])
    expected = {
        "model": "reasoner",
        "input": [
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": QUESTION},
                    {"type": "input_image", "image_url": f"data:image/png;base64,{figure.base64()}"},
                    {
                        "type": "input_file",
                        "filename": "findings.pdf",
                        "file_data": f"data:application/pdf;base64,{pdf.base64()}",
                    },
                ],
            }
        ],
        "stream": False,
    }
    (request,) = _sent(fault, gw)
    assert request.body == _compact(expected)


@pytest.mark.parametrize("api", ["chat", "messages", "generate-content", "responses"])
def test_converse_makes_the_same_parts_from_objects(make, fault, figure, api):
    """`Gateway.converse` (the magics' path) takes the figure object itself."""
    fig, ax = plt.subplots(figsize=(3.2, 2.4), dpi=100)
    ax.plot([0, 1, 2, 3, 4], [0, 1, 0.3, 1, 0])
    by_object, by_parts = make("ok"), make("ok")
    system = {"role": "system", "content": "Be brief."}
    by_object.converse(api, "m", [system, {"role": "user", "content": [QUESTION, fig]}])
    plt.close(fig)
    method, arguments = for_api(api, "m", [system, {"role": "user", "content": [QUESTION, figure]}])
    getattr(by_parts, method)(**arguments)
    assert _sent(fault, by_object)[0].body == _sent(fault, by_parts)[0].body
    assert figure.base64() in _sent(fault, by_object)[0].body.decode()


def test_plain_string_content_is_unchanged_on_the_wire(make, fault):
    gw = make("ok")
    for api in ("chat", "messages", "generate-content", "responses"):
        gw.converse(api, "m", [{"role": "user", "content": "Hello"}])
    bodies = [r.body for r in _sent(fault, gw)]
    assert bodies == [
        b'{"model":"m","messages":[{"role":"user","content":"Hello"}],"stream":false}',
        b'{"model":"m","max_tokens":1024,"messages":[{"role":"user","content":"Hello"}],"stream":false}',
        b'{"contents":[{"role":"user","parts":[{"text":"Hello"}]}]}',
        b'{"model":"m","input":"Hello","stream":false}',
    ]


def test_urls_are_passed_on_never_fetched(make, fault):
    picture = load("https://pictures.invalid/cat.png")
    document = load("https://pictures.invalid/report.pdf")
    gw = make("ok")
    for api in ("chat", "messages", "generate-content", "responses"):
        gw.converse(api, "m", [{"role": "user", "content": ["Describe", picture]}])
    gw.converse("responses", "m", [{"role": "user", "content": ["Summarise", document]}])
    gw.converse("messages", "m", [{"role": "user", "content": ["Summarise", document]}])
    sent = [r.json() for r in _sent(fault, gw)]
    assert len(sent) == 6  # no request anywhere else: the client never fetches the URL
    assert sent[0]["messages"][0]["content"][1] == {
        "type": "image_url",
        "image_url": {"url": "https://pictures.invalid/cat.png", "detail": "auto"},
    }
    assert sent[1]["messages"][0]["content"][1] == {
        "type": "image",
        "source": {"type": "url", "url": "https://pictures.invalid/cat.png"},
    }
    assert sent[2]["contents"][0]["parts"][1] == {
        "file_data": {"mime_type": "image/png", "file_uri": "https://pictures.invalid/cat.png"}
    }
    assert sent[3]["input"][0]["content"][1] == {
        "type": "input_image",
        "image_url": "https://pictures.invalid/cat.png",
    }
    assert sent[4]["input"][0]["content"][1] == {
        "type": "input_file",
        "file_url": "https://pictures.invalid/report.pdf",
    }
    assert sent[5]["messages"][0]["content"][1]["source"] == {
        "type": "url",
        "url": "https://pictures.invalid/report.pdf",
    }
    with pytest.raises(InvalidRequest, match="chat completions take a file as its bytes, not a URL"):
        gw.converse("chat", "m", [{"role": "user", "content": ["Summarise", document]}])
    assert len(_sent(fault, gw)) == 6


def test_the_chat_to_responses_fallback_carries_the_picture(make, fault, figure):
    """A reasoning model refused on chat completions is asked again on /v1/responses, with
    chat's parts made responses' parts."""
    gw = make("reasoner")
    gw.chat("deep-thinker", [{"role": "user", "content": parts("chat", [QUESTION, figure])}])
    first, second = _sent(fault, gw)
    assert (first.path, second.path) == ("/v1/chat/completions", "/v1/responses")
    assert second.json()["input"] == [
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": QUESTION},
                {"type": "input_image", "image_url": f"data:image/png;base64,{figure.base64()}"},
            ],
        }
    ]
    body = {"model": "x", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5}
    assert to_responses(body) == {"model": "x", "input": "hi", "max_output_tokens": 5}


# -- refused before sending ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "content", "says"),
    [
        (
            "chat",
            [{"type": "image_url", "image_url": {"url": "file:///etc/passwd"}}],
            "http(s) URL or a data",
        ),
        ("chat", [{"type": "image", "source": {}}], "image is a messages part; chat takes"),
        ("chat", [{"type": "video_url", "video_url": {}}], "type must be one of text, image_url"),
        ("chat", [{"type": "file", "file": {}}], "needs exactly one of file_data, file_id"),
        ("chat", [42], "part 0: must be an object|an int is neither text"),
        ("chat", [], "must not be an empty list"),
        ("messages", [{"type": "image_url", "image_url": {"url": "x"}}], "image_url is a chat part"),
        (
            "messages",
            [{"type": "image", "source": {"type": "file", "path": "/etc"}}],
            "must be base64 or url",
        ),
        ("messages", [{"text": "no type"}], "needs a type"),
        ("responses", [{"type": "input_image", "image_url": "data:image/png,raw"}], "http(s) URL or a data"),
        ("generate-content", [{"type": "text", "text": "x"}], "generate-content parts have no type"),
        ("generate-content", [{"inline_data": {"data": "AAAA"}}], "mime_type must be a string"),
    ],
)
def test_bad_parts_are_refused_in_one_line_before_sending(make, fault, method, content, says):
    gw = make("ok")
    with pytest.raises(InvalidRequest, match="|".join(map(re.escape, says.split("|")))) as caught:
        if method == "generate-content":
            gw.generate_content("gem", [{"role": "user", "parts": content}])
        elif method == "responses":
            gw.responses("m", [{"role": "user", "content": content}])
        else:
            getattr(gw, method)("m", [{"role": "user", "content": content}])
    assert "\n" not in str(caught.value)
    assert _sent(fault, gw) == []


def test_a_value_that_is_no_picture_is_refused_before_sending(make, fault):
    gw = make("ok")
    with pytest.raises(InvalidRequest, match="a dict_keys is neither text, a picture nor a file"):
        gw.converse("chat", "m", [{"role": "user", "content": ["look", {}.keys()]}])
    assert _sent(fault, gw) == []


# -- a model that takes text only ------------------------------------------------------------------


def test_a_refusal_of_pictures_is_recognised(make, fault, figure):
    gw = make("text-only")
    assert gw.chat("m", [{"role": "user", "content": "hi"}]).text == "Hello world"
    with pytest.raises(APIError) as caught:
        gw.converse("chat", "m", [{"role": "user", "content": [QUESTION, figure]}])
    error = caught.value
    assert error.status == 400 and "image_url is only supported" in error.message
    refused = _sent(fault, gw)[-1]
    assert refuses_content(error.status, error.message, refused.body) == TEXT_ONLY
    assert refuses_content(error.status, error.message, _sent(fault, gw)[0].body) is None  # text only sent
    assert refuses_content(400, "context too long for this model", refused.body) is None
    assert refuses_content(429, error.message, refused.body) is None


# -- what the log keeps, what the cache knows --------------------------------------------------------


def _rows(gw) -> list[dict]:
    st = store.default_store(log=True)
    assert st.flush(30)
    return [r for r in reversed(st.logs(n=0)) if r["gateway"] == gateway_address(gw.base_url)]


def test_the_log_keeps_type_size_and_sha256_not_the_bytes(make, figure):
    gw = make("ok")
    gw.converse("chat", "m", [{"role": "user", "content": [QUESTION, figure]}], stream=False)
    (row,) = _rows(gw)
    content = row["messages"][0]["content"]
    assert content[0] == {"type": "text", "text": QUESTION}
    assert {k: content[1][k] for k in ("type", "kind", "media_type", "size", "sha256")} == {
        "type": "attachment",
        "kind": "image",
        "media_type": "image/png",
        "size": len(figure.data),
        "sha256": hashlib.sha256(figure.data).hexdigest(),
    }
    assert figure.base64()[:200] not in json.dumps(row)
    assert row["prompt"] == QUESTION
    restored = chat_messages(row)[0]["content"]  # %gatecell restore: a picture was there
    assert restored[0] == QUESTION
    assert restored[1].startswith(
        f"[image sent here: PNG {size_text(len(figure.data))}, sha256 {figure.sha256[:12]}…"
    )
    assert "the log kept no bytes" in restored[1]


def test_with_log_media_the_log_keeps_the_picture(make, figure):
    gw = make("ok", log_media=True)
    gw.converse("messages", "m", [{"role": "user", "content": [QUESTION, figure]}])
    (row,) = _rows(gw)
    assert row["messages"][0]["content"][1]["source"]["data"] == figure.base64()
    restored = chat_messages(row)[0]["content"][1]
    assert isinstance(restored, Attachment) and restored.data == figure.data


def test_the_cache_key_depends_on_the_picture(make, fault, figure):
    gw = make("ok", cache=True)
    other = attachment_of(Image.new("RGB", (32, 32), "red"))
    ask = [{"role": "user", "content": [QUESTION, figure]}]
    gw.converse("chat", "m", ask)
    second = gw.converse("chat", "m", ask)
    assert second.meta.cached is True
    assert gw.converse("chat", "m", [{"role": "user", "content": [QUESTION, other]}]).meta.cached is False
    assert len(_sent(fault, gw)) == 2


# -- reading parts back -------------------------------------------------------------------------------


def test_neutral_reads_every_apis_parts_back(figure):
    for api in ("chat", "messages", "generate-content", "responses"):
        text, picture = (neutral(p) for p in parts(api, [QUESTION, figure]))
        assert text == QUESTION
        assert picture.data == figure.data and picture.media_type == "image/png"
    with pytest.raises(InvalidRequest, match="is not valid base64"):
        neutral({"type": "image_url", "image_url": {"url": "data:image/png;base64,@@@"}})
    with pytest.raises(InvalidRequest, match="data:<type>/<subtype>;base64"):
        neutral({"type": "image_url", "image_url": {"url": "data:image/png,rawbytes"}})
    tool = {"type": "tool_use", "id": "t1"}
    assert neutral(tool) is tool


def test_content_summary_holds_no_bytes(figure):
    summary = content_summary(parts("chat", [QUESTION, figure]))
    assert summary[0] == {"type": "text", "text": QUESTION}
    assert summary[1]["sha256"] == figure.sha256 and summary[1]["size"] == len(figure.data)
    assert "base64" not in json.dumps(summary)
    plain = [{"type": "text", "text": "hi"}]
    assert content_summary(plain) is plain and content_summary("hi") == "hi"
    audio = {"type": "input_audio", "input_audio": {"data": "A" * 5000, "format": "wav"}}
    assert content_summary([audio])[0]["input_audio"]["data"].startswith("<5,000 characters, sha256 ")
