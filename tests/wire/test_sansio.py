"""The sans-IO decisions, without a network: retry waits, routing, job shapes, media sniffing."""

from __future__ import annotations

import re
from email.utils import formatdate

import pytest

from gatecell.wire.conversation import to_responses
from gatecell.wire.errors import APIError, BadRequestError, JobError
from gatecell.wire.jobs import JobPaths, job_state, submitted_id
from gatecell.wire.results import Audio, ModelList, Reply, sniff
from gatecell.wire.retry import RetryPolicy, retry_after
from gatecell.wire.routing import Router, to_chat

NOW = 1_700_000_000.0


def test_retry_after_forms():
    assert retry_after({"retry-after": "2"}) == 2.0
    assert retry_after({"retry-after": "0.25"}) == 0.25
    assert retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5  # ms wins
    assert retry_after({"retry-after": formatdate(NOW + 30, usegmt=True)}, now=NOW) == pytest.approx(
        30, abs=1
    )
    assert retry_after({"retry-after": formatdate(NOW - 30, usegmt=True)}, now=NOW) == 0.0
    assert retry_after({"retry-after": "soon"}) is None
    assert retry_after({}) is None


def test_backoff_is_exponential_jittered_and_capped():
    policy = RetryPolicy(base=0.5, cap=8.0, retry_after_cap=60)
    for attempt, full in [(0, 0.5), (1, 1.0), (2, 2.0), (5, 8.0), (9, 8.0)]:
        delays = {policy.delay(attempt) for _ in range(50)}
        assert all(0.75 * full <= d <= full for d in delays)
        assert len(delays) > 1  # jitter
    assert policy.delay(0, {"retry-after": "3"}) == 3.0
    assert policy.delay(0, {"retry-after": "3600"}) == 60  # honoured up to the cap
    assert [s for s in (400, 401, 404, 408, 409, 413, 429, 500, 502, 503) if policy.retryable(s)] == [
        408,
        409,
        429,
        500,
        502,
        503,
    ]


def test_router_patterns_metadata_and_refusals():
    router = Router()
    assert router.wants_responses("o3-pro-2025-06-10")
    assert router.wants_responses("O4-MINI-DEEP-RESEARCH")
    assert not router.wants_responses("gpt-4o-mini")
    assert not router.wants_responses("gemini-2.5-pro")
    custom = Router(["*-thinker", re.compile(r"^r\d$")])
    assert (
        custom.wants_responses("deep-thinker")
        and custom.wants_responses("r1")
        and not custom.wants_responses("o3-pro")
    )

    models = ModelList.from_body(
        {
            "data": [
                {"id": "a", "supported_endpoints": ["/v1/responses"]},
                {"id": "b", "supported_endpoint_types": ["openai-response"]},
                {"id": "c", "supported_endpoint_types": ["openai", "openai-response"]},
                {"id": "o3-pro", "supported_endpoints": ["/v1/chat/completions"]},  # the gateway knows better
                {"id": "d"},
            ]
        }
    )
    router.learn(models)
    assert [m for m in ("a", "b", "c", "o3-pro", "d") if router.wants_responses(m)] == ["a", "b"]
    router.remember("d")
    assert router.wants_responses("d")

    refusal = BadRequestError(
        "This model is only supported in v1/responses and not in v1/chat/completions.", status=400
    )
    assert Router.is_refusal(refusal)
    assert not Router.is_refusal(BadRequestError("temperature must be at most 2", status=400))
    assert not Router.is_refusal(APIError("use v1/responses", status=500))


def test_chat_request_as_responses_and_back():
    body = to_responses(
        {
            "model": "m",
            "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
            "max_tokens": 50,
            "temperature": 1.0,
            "reasoning_effort": "high",
        }
    )
    assert body == {
        "model": "m",
        "temperature": 1.0,
        "instructions": "Be brief.",
        "input": "Hi",
        "max_output_tokens": 50,
        "reasoning": {"effort": "high"},
    }
    turns = to_responses(
        {
            "model": "m",
            "messages": [
                {"role": "user", "content": "a"},
                {"role": "assistant", "content": "b"},
                {"role": "user", "content": "c"},
            ],
        }
    )
    assert turns["input"] == [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "b"},
        {"role": "user", "content": "c"},
    ]
    chat = to_chat(
        {
            "id": "r",
            "status": "completed",
            "created_at": 5.5,
            "output": [{"type": "message", "content": [{"type": "output_text", "text": "x"}]}],
            "usage": {"input_tokens": 1, "output_tokens": 2},
        },
        "m",
    )
    assert chat["choices"][0]["message"] == {"role": "assistant", "content": "x"}
    assert chat["usage"].model_dump() == {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}
    assert chat["created"] == 5 and chat["model"] == "m"


PATHS = JobPaths()


@pytest.mark.parametrize(
    "body, status, progress, error",
    [
        ({"id": "t", "status": "NOT_START", "progress": "0%"}, "queued", 0.0, None),
        ({"id": "t", "status": "IN_PROGRESS", "progress": "45%"}, "running", 45.0, None),
        ({"id": "t", "status": "FAILURE", "failReason": "banned prompt"}, "failed", None, "banned prompt"),
        (
            {
                "code": "success",
                "data": {
                    "task_id": "t",
                    "status": "SUCCESS",
                    "progress": "100%",
                    "data": [{"audio_url": "u"}],
                },
            },
            "succeeded",
            100.0,
            None,
        ),
        ({"code": "error", "message": "task not found"}, "failed", None, "task not found"),
        ({"id": "t", "object": "video", "status": "in_progress", "progress": 30}, "running", 30.0, None),
        (
            {"id": "t", "object": "video", "status": "failed", "error": {"message": "moderation"}},
            "failed",
            None,
            "moderation",
        ),
        ({"state": "something-new"}, "running", None, None),
        ("not even json", "queued", None, None),
    ],
)
def test_job_shapes(body, status, progress, error):
    job = job_state("video", "t", body, PATHS)
    assert (job.status, job.progress, job.error, job.raw) == (status, progress, error, body)


def test_job_media_urls_and_ids():
    assert job_state(
        "imagine", "t", {"status": "SUCCESS", "imageUrl": "http://x/i.png"}, PATHS
    ).media_urls == [("http://x/i.png", None)]
    assert job_state("video", "v1", {"status": "completed"}, PATHS).media_urls == [
        ("/v1/videos/v1/content", "video/mp4")
    ]
    custom = JobPaths(video_content="/content/{id}.mp4", music_fetch="/m/{id}")
    assert job_state("video", "v1", {"status": "completed"}, custom).media_urls == [
        ("/content/v1.mp4", "video/mp4")
    ]
    assert custom.fetch("music", "42") == "/m/42" and custom.submit("imagine") == "/imgjob/submit/imagine"
    assert submitted_id("imagine", {"code": 1, "result": "123"}) == "123"
    assert submitted_id("imagine", {"code": 22, "result": "124", "description": "in queue"}) == "124"
    assert submitted_id("music", {"code": "success", "data": "m9"}) == "m9"
    assert submitted_id("video", {"id": "video_7", "status": "queued"}) == "video_7"
    with pytest.raises(JobError, match=r"code 23\): queue full"):
        submitted_id("imagine", {"code": 23, "description": "queue full", "result": None})
    with pytest.raises(JobError, match="quota exhausted"):
        submitted_id("music", {"code": "fail", "message": "quota exhausted", "data": None})
    with pytest.raises(JobError, match="without a task id"):
        submitted_id("video", {"object": "video"})


@pytest.mark.parametrize(
    "data, fmt",
    [
        (b"RIFF\0\0\0\0WAVEfmt ", "wav"),
        (b"ID3\x04\0", "mp3"),
        (b"\xff\xfb\x90\x00", "mp3"),
        (b"\xff\xf1\x50\x80", "aac"),
        (b"OggS\0\x02", "ogg"),
        (b"fLaC\0\0", "flac"),
        (b"\x89PNG\r\n", "png"),
        (b"\0\0\0\x18ftypmp42", "mp4"),
        (b"hello", None),
    ],
)
def test_sniff(data, fmt):
    assert (sniff(data) or (None,))[0] == fmt


def test_audio_format_prefers_bytes_then_content_type_then_request():
    assert Audio(b"fLaC\0", "audio/mpeg").format == "flac"  # the header lies; the bytes do not
    assert Audio(b"\0\0raw", "audio/wav").format == "wav"
    assert Audio(b"\0\0raw", "application/octet-stream", requested="pcm").format == "pcm"
    assert Audio(b"\0\0raw", None).mime == "application/octet-stream"


def test_reply_recognises_the_native_shapes_and_keeps_the_rest_raw():
    messages = Reply(
        {
            "type": "message",
            "content": [{"type": "thinking", "thinking": "hmm"}, {"type": "text", "text": "Hi"}],
            "usage": {"input_tokens": 1},
        }
    )
    assert (messages.text, messages.reasoning, messages.usage) == ("Hi", "hmm", {"input_tokens": 1})
    gc = Reply(
        {
            "candidates": [
                {"content": {"parts": [{"text": "plan", "thought": True}, {"text": "Bon"}, {"text": "jour"}]}}
            ],
            "usageMetadata": {"totalTokenCount": 3},
        }
    )
    assert (gc.text, gc.reasoning, gc.usage) == ("Bonjour", "plan", {"totalTokenCount": 3})
    odd = Reply({"result": {"weird": True}})
    assert (odd.text, odd.reasoning, odd.usage, odd.raw) == (None, None, None, {"result": {"weird": True}})
