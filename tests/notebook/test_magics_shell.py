"""The magics in a real IPython shell against the local gateway and the fault server."""

from __future__ import annotations

import base64

import pytest

MAGICS = ["chat", "reason", "image", "speak", "imagine", "video", "music"]


def texts(captured) -> list[str]:
    return [o.data.get("text/plain", "") for o in captured.outputs]


def htmls(captured) -> list[str]:
    return [o.data.get("text/html", "") for o in captured.outputs]


def test_load_is_lazy():
    import subprocess
    import sys

    code = (
        "from IPython.testing.globalipapp import start_ipython; ip = start_ipython(); "
        "ip.run_line_magic('load_ext', 'gatecell'); import sys; "
        "heavy = ('httpx', 'ipywidgets', 'gatecell.local', 'gatecell.gateway', 'pydantic',"
        " 'markdown_it', 'nh3')\n"
        "print(sorted(m for m in heavy if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_panels_are_on_the_public_face_and_load_when_asked():
    import subprocess
    import sys

    code = (
        "import sys, gatecell\n"
        "before = 'ipywidgets' in sys.modules\n"
        "from gatecell import ChatPanel, ComparePanel, Dashboard, ImagePanel, MediaPanel, SpeechPanel\n"
        "from gatecell.notebook import widgets\n"
        "print(before, ChatPanel is widgets.ChatPanel, MediaPanel is widgets.MediaPanel,"
        " 'ChatPanel' in gatecell.__all__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "True", "True", "True"]


@pytest.mark.parametrize("magic", MAGICS)
def test_every_magic_has_help(run, magic):
    # IPython alone refuses the empty cell bodies before the magic runs
    for code in (
        f"%%{magic} --help\nignored",
        f"%{magic} --help",
        f"%%{magic} --help",
        f"%%{magic} -h\n\n  \n",
    ):
        result, captured = run(code)
        assert result.success, result.error_in_exec
        assert f"usage: %%{magic}" in captured.stdout
        assert "-o VAR, --out VAR" in captured.stdout


def test_questions_on_the_line_are_prompts_not_help(run, ipshell):
    result, _ = run("%chat my name is Ada")
    result, _ = run("%chat what is my name?")  # IPython alone would read `name?` as a help request
    assert result.success and "Ada" in result.result
    from gatecell.notebook import _keep_questions

    assert _keep_questions(["%chat?\n"]) == ["%chat?\n"]  # IPython's own help on the magic stays
    assert _keep_questions(["%%chat\n", "%chat who?\n"]) == [
        "%%chat\n",
        "%chat who?\n",
    ]  # a cell body is left alone


def test_gatecell_help_and_subcommand_help(run):
    result, captured = run("%gatecell help")
    assert "%%chat" in captured.stdout and "%gatecell models" in captured.stdout
    result, captured = run("%gatecell job --help")
    assert result.success and "usage: %gatecell job" in captured.stdout


def test_chat_streams_into_one_display_and_completes(run, gc):
    result, captured = run("%%chat\nrepeat after me: " + " ".join(f"w{i}" for i in range(300)))
    assert result.success, result.error_in_exec
    ids = {o.transient["display_id"] for o in captured.outputs}
    assert len(ids) == 1  # one display, updated in place
    assert [o.update for o in captured.outputs][0] is False
    final = captured.outputs[-1]
    assert final.data["text/plain"] == " ".join(f"w{i}" for i in range(300))
    assert final.metadata["gatecell"]["model"] == "local-chat"
    assert final.metadata["gatecell"]["endpoint"] == "/v1/chat/completions"
    assert str(result.result) == final.data["text/plain"]
    turns = gc.session.memory.get().turns
    assert [t.role for t in turns] == ["user", "assistant"] and turns[1].content == str(result.result)


def test_updates_are_coalesced(run, gc):
    gc.session.config.update_interval = 0.2
    try:
        result, captured = run(
            "%%chat --max-tokens 2000\nrepeat after me: " + " ".join(f"w{i}" for i in range(2000))
        )
    finally:
        gc.session.config.update_interval = 0.1
    assert result.success
    # 2,000 fragments at 2 ms each take about 4 s: about 20 renders, far from one per fragment
    assert len(captured.outputs) < 100
    assert captured.outputs[-1].data["text/plain"].endswith("w1999")


def test_conversation_memory_named_and_reset(run, gc):
    run("%chat my name is Ada")
    run("%chat -c other my name is Bob")
    result, _ = run("%chat what is my name?")
    assert "Ada" in result.result
    result, _ = run("%chat -c other what is my name?")
    assert "Bob" in result.result
    result, _ = run("%chat --new -c other what is my name?")
    assert "not told me" in result.result
    _, captured = run("%gatecell history --all")
    shown = htmls(captured)[0]
    assert "<strong>conversation default</strong>" in shown and "<strong>conversation other</strong>" in shown
    _, captured = run("%gatecell reset --all")
    assert "forgot" in captured.stdout
    assert gc.session.memory.conversations == {}


def test_system_prompt_and_no_stream_and_out_var(run, ipshell):
    result, captured = run("%chat --no-stream -s 'be brief' -o answer what is 6*7?")
    assert result.success
    assert "42" in ipshell.user_ns["answer"]
    assert len(captured.outputs) == 1  # shown once, no live updates
    assert captured.outputs[0].metadata["gatecell"]["usage"]["total_tokens"] > 0


@pytest.mark.parametrize(
    "api, model",
    [
        ("messages", "local-chat"),
        ("generate-content", "local-chat"),
        ("responses", "local-reasoner"),
        ("chat", "local-reasoner"),
    ],
)
def test_native_apis_and_routing(run, api, model):
    result, captured = run(f"%chat -m {model} --api {api} what is 3+4?")
    assert result.success, result.error_in_exec
    assert "7" in result.result
    result, _ = run(f"%chat --new --no-stream -m {model} --api {api} what is 3+5?")
    assert "8" in result.result


def test_reason_shows_reasoning_summary(run):
    result, captured = run("%%reason --effort high --no-stream\nwhat is 2+3?")
    assert result.success, result.error_in_exec
    assert "5" in result.result
    assert result.result.reasoning
    assert "<details><summary>Reasoning summary</summary>" in htmls(captured)[-1]
    assert captured.outputs[-1].metadata["gatecell"]["endpoint"] == "/v1/responses"


def test_interpolation(run, ipshell):
    ipshell.user_ns["n"] = 20
    result, _ = run("%chat what is {n}+1?")
    assert "21" in result.result
    result, _ = run('%chat repeat after me: {{n}} and {"json": 1}')
    assert result.result == '{n} and {"json": 1}'
    result, _ = run("%chat --no-interpolate repeat after me: {n}")
    assert result.result == "{n}"
    result, captured = run("%chat repeat after me: {missing_name} and $e^{n}$")
    assert result.success and result.result == "{missing_name} and $e^{n}$"
    assert texts(captured)[0] == "sent as written, no such variable in the notebook: {missing_name}"


def test_temperature_out_of_range_sends_nothing(run, gc, fault_server):
    gc.session.config.base_url = fault_server.base_url
    before = len(fault_server.requests)
    for line in (
        "%chat -t 2.5 hi",
        "%chat --top-p 1.5 hi",
        "%chat --max-tokens 0 hi",
        "%image --size big a cat",
    ):
        result, captured = run(line)
        assert not result.success
        lines = [line for line in captured.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("UsageError:"), lines
    assert len(fault_server.requests) == before


def test_an_empty_cell_is_one_line_and_sends_nothing(run, gc, fault_server):
    gc.session.config.base_url = fault_server.base_url
    before = len(fault_server.requests)
    result, captured = run("%%chat -m fault-chat\n\n")
    assert not result.success
    assert captured.stderr.strip() == (
        "UsageError: %chat: nothing to send: write the prompt in the cell, or after the options"
    )
    assert len(fault_server.requests) == before


def test_a_default_model_the_gateway_does_not_serve_names_those_it_does(run, gc, fault_server):
    gc.session.config.base_url = fault_server.base_url
    default, gc.session.config.model = gc.session.config.model, "no-such-model"
    fault_server.mode = "unknown_model"
    before = len(fault_server.requests)
    try:
        lines = []
        for cell in ("%chat hello", "%chat hello again", "%chat -m other-model hello"):
            result, captured = run(cell)
            assert not result.success
            lines += captured.stderr.splitlines()
    finally:
        gc.session.config.model = default
    served = "; it serves fault-chat; "
    assert lines[0] == (
        "gatecell: 404 from POST /v1/chat/completions: model 'no-such-model' not found. "
        f"the gateway does not serve 'no-such-model'{served}"
        "set the default with %config Gatecell.model = '...' or GATECELL_MODEL"
    )
    assert lines[1] == lines[0] and len(lines) == 3
    assert lines[2].endswith(f"does not serve 'other-model'{served}choose one with -m MODEL")
    models_asked = [r for r in fault_server.requests[before:] if r[:2] == ("GET", "/v1/models")]
    assert len(models_asked) == 1  # the list is asked once per connection


def test_a_refusal_that_is_not_about_the_model_is_left_as_it_is(run, gc, fault_server):
    gc.session.config.base_url = fault_server.base_url
    fault_server.mode = "error400"
    result, captured = run("%chat -m m hello")  # 'm' is unlisted, but the message is not about it
    assert not result.success
    assert captured.stderr.strip() == (
        "gatecell: 400 from POST /v1/chat/completions: context too long for this model"
    )


def test_key_is_refused_on_the_line(run, fault_server):
    before = len(fault_server.requests)
    for line in (
        "%chat --api-key sk-abcdefghijklmnop hi",
        "%chat -m sk-abcdefghijklmnop hi",
        "%gatecell --key=x",
    ):
        result, captured = run(line)
        assert not result.success
        assert "%gatecell key" in captured.stderr
        assert "abcdefghijklmnop" not in captured.stderr
    assert len(fault_server.requests) == before


def test_gateway_error_is_one_line_without_key(run, gc, fault_server):
    gc.session.config.base_url = fault_server.base_url
    fault_server.mode = "error429"
    result, captured = run("%chat hello")
    assert not result.success
    lines = [line for line in captured.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, captured.stderr
    assert "429" in lines[0] and "rate limit reached" in lines[0]
    assert fault_server.key not in captured.stderr + captured.stdout
    assert "Traceback" not in captured.stderr + captured.stdout


def test_debug_shows_the_traceback(run, gc, fault_server):
    gc.session.config.base_url = fault_server.base_url
    fault_server.mode = "error400"
    result, captured = run("%chat --debug hello")
    assert not result.success
    assert (
        "Traceback" in captured.stdout + captured.stderr
        or "BadRequestError" in captured.stdout + captured.stderr
    )


def test_errors_raised_by_any_code_are_one_line(run, gc, fault_server, ipshell):
    ipshell.user_ns["url"] = fault_server.base_url
    fault_server.mode = "error400"
    result, captured = run(
        "from gatecell import Gateway\n"
        "Gateway(url, 'sk-whatever-1234567890').chat(model='m', messages=[{'role': 'user', 'content': 'x'}])"
    )
    assert not result.success
    assert captured.stderr.strip().startswith("gatecell: 400")
    assert "Traceback" not in captured.stderr + captured.stdout


def test_stream_cut_keeps_partial_text_marked(run, gc, fault_server, ipshell):
    gc.session.config.base_url = fault_server.base_url
    fault_server.mode = "cut"
    result, captured = run("%chat -o cut hello")
    assert not result.success
    assert captured.stderr.count("\n") == 1 and "gatecell:" in captured.stderr
    partial = ipshell.user_ns["cut"]
    assert partial.partial and partial.startswith("word0 word1")
    assert "partial reply" in texts(captured)[-1]
    turn = gc.session.memory.get().turns[-1]
    assert turn.partial and turn.content == str(partial)
    _, captured = run("%gatecell history")
    assert "partial: interrupted" in texts(captured)[0]


def test_models_and_config(run, gc, local_gateway):
    _, captured = run("%gatecell models")
    table = htmls(captured)[0]
    left = '<td style="text-align:left">'
    assert f"{left}local-chat</td>" in table and f"{left}local-image</td>" in table  # text to the left
    assert texts(captured)[0].splitlines()[0].split() == ["model", "owned", "by", "endpoints"]
    _, captured = run("%gatecell config")
    shown = texts(captured)[0]
    assert local_gateway.base_url in shown and "set (environment)" in shown
    assert local_gateway.api_key.reveal() not in shown


@pytest.mark.parametrize(
    "cell", ["%%chat --max-tokens 3", "%%chat --max-tokens 3 --no-stream", "%%reason --max-tokens 3"]
)
def test_a_reply_cut_by_max_tokens_says_so(run, cell):
    result, captured = run(f"{cell}\ncount to 20")
    assert result.success, result.error_in_exec
    assert str(result.result) == "1, 2, 3,"
    assert texts(captured)[-1].startswith("1, 2, 3,\n\ncut at the token limit (finish reason: ")
    result, captured = run(cell.replace("3", "50") + "\ncount to 5")
    assert "cut at the token limit" not in texts(captured)[-1]


def test_text_columns_are_left_aligned_and_numbers_right_aligned():
    from IPython.utils.capture import capture_output

    from gatecell.notebook.display import show_table

    with capture_output() as captured:
        show_table(
            ("model", "requests", "cost"), [("local-chat", "12", "$0.0042"), ("local-image-2", "3", "-")]
        )
    assert texts(captured)[0].splitlines() == [
        "model          requests     cost",
        "local-chat           12  $0.0042",
        "local-image-2         3        -",
    ]
    table = htmls(captured)[0]
    assert '<th style="text-align:left">model</th>' in table
    assert '<td style="text-align:right">12</td>' in table and '<td style="text-align:right">-</td>' in table


def test_config_traits_and_env(ipshell, gc, monkeypatch):
    from gatecell.notebook.config import Gatecell

    monkeypatch.setenv("GATECELL_MODEL", "env-model")
    monkeypatch.setenv("GATECELL_FOOTER", "1")
    fresh = Gatecell()
    assert fresh.model == "env-model" and fresh.footer is True
    ipshell.config.Gatecell.image_size = "256x256"  # what ipython_config.py does
    try:
        assert Gatecell(parent=ipshell).image_size == "256x256"
    finally:
        del ipshell.config.Gatecell["image_size"]
    ipshell.run_line_magic("config", "Gatecell.model = 'configured'")
    try:
        assert gc.session.config.model == "configured"
    finally:
        ipshell.run_line_magic("config", "Gatecell.model = 'local-chat'")


def test_key_from_getpass(run, gc, monkeypatch, local_gateway):
    monkeypatch.delenv("GATECELL_API_KEY")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    result, captured = run("%chat hi")
    assert not result.success and "401" in captured.stderr
    monkeypatch.setattr("getpass.getpass", lambda prompt="": local_gateway.api_key.reveal())
    result, captured = run("%gatecell key")
    assert "key set" in captured.stdout and local_gateway.api_key.reveal() not in captured.stdout
    result, _ = run("%chat hi")
    assert result.success
    gc.session._key = None


def test_image_and_speech_are_embedded(run, ipshell, tmp_path):
    result, captured = run("%%image --size 64x64 -o img --footer --save pic.png\na red square")
    assert result.success, result.error_in_exec
    png = captured.outputs[0].data["image/png"]
    assert base64.b64decode(png) == bytes(ipshell.user_ns["img"])
    assert captured.outputs[0].metadata["gatecell"]["endpoint"] == "/v1/images/generations"
    assert "local-image" in captured.outputs[1].data["text/html"]  # the footer
    assert (tmp_path / "pic.png").read_bytes() == bytes(ipshell.user_ns["img"])
    result, captured = run("%speak -v nova --autoplay -o sound hello there")
    assert result.success, result.error_in_exec
    player = captured.outputs[0].data["text/html"]
    assert "<audio controls autoplay" in player and "data:audio/" in player
    assert ipshell.user_ns["sound"].mime.startswith("audio/")


def test_jobs_progress_and_resume(run, gc, ipshell):
    gc.session.config.output = "text"
    result, captured = run("%video -o clip a cat on a boat")
    assert result.success, result.error_in_exec
    assert "succeeded 100%" in captured.stdout
    assert "<video controls" in captured.outputs[-1].data["text/html"]
    assert ipshell.user_ns["clip"].status == "succeeded"
    result, captured = run("%music --style jazz --no-wait a tune")
    job_id = result.result
    assert f"%gatecell job {job_id}" in captured.stdout
    result, captured = run(f"%gatecell job {job_id}")
    assert result.success, result.error_in_exec
    assert "data:audio/" in captured.outputs[-1].data["text/html"]
    result, captured = run("%gatecell job nosuch")
    assert not result.success and "--kind" in captured.stderr


def test_big_video_is_saved_not_embedded(run, gc, tmp_path):
    gc.session.config.video_embed_limit = 100
    try:
        result, captured = run("%imagine a cat")  # imagine gives images: always embedded
        assert "image/png" in captured.outputs[-1].data or "text/html" in captured.outputs[-1].data
        result, captured = run("%video a dog")
    finally:
        gc.session.config.video_embed_limit = 20_000_000
    html = captured.outputs[-1].data["text/html"]
    assert "base64" not in html and "gatecell-media/" in html
    assert list((tmp_path / "gatecell-media").iterdir())


def test_text_output_streams_to_stdout(run, gc):
    gc.session.config.output = "text"
    result, captured = run("%chat --footer count to 5")
    assert captured.stdout.startswith("1, 2, 3, 4, 5.\n-- local-chat")
    assert captured.outputs == []


def test_value_is_not_shown_twice(run, ipshell):
    result, captured = run("%chat count to 3")
    assert len(captured.outputs) >= 1
    result, captured = run("_")  # a later display of the value renders it
    assert captured.outputs[-1].data["text/plain"] == "1, 2, 3."
    assert "<p>1, 2, 3.</p>" in captured.outputs[-1].data["text/html"]


def test_unload_and_load_again(ipshell):
    from IPython.utils.capture import capture_output

    ipshell.run_line_magic("unload_ext", "gatecell")
    with capture_output() as captured:
        result = ipshell.run_cell("%chat hi")
    assert not result.success and "not found" in captured.stderr
    assert ipshell.custom_exceptions == ()
    ipshell.run_line_magic("load_ext", "gatecell")
    assert "chat" in ipshell.magics_manager.magics["cell"]
