"""The chat panel: streaming, multi-turn memory, Stop, Clear, errors, coalesced updates."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace

import ipywidgets as widgets
import pytest

from gatecell.notebook.widgets import ChatPanel
from gatecell.wire.apis.spec import RANGES

COUNT = ", ".join(str(n) for n in range(1, 21)) + "."


def texts(panel: ChatPanel) -> list[str]:
    return [bubble.value for bubble in panel.transcript.children]


def test_model_dropdown_offers_chat_and_reasoning_models_only(gw):
    panel = ChatPanel(gw)
    assert "local-chat" in panel.model.options
    assert "local-reasoner" in panel.model.options
    assert "local-image" not in panel.model.options
    assert "local-tts" not in panel.model.options


def test_sliders_cover_the_spec_ranges(gw):
    panel = ChatPanel(gw)
    assert (panel.temperature.min, panel.temperature.max) == RANGES["temperature"]
    assert (panel.top_p.min, panel.top_p.max) == RANGES["top_p"]


def test_send_streams_the_reply_into_the_transcript(gw):
    panel = ChatPanel(gw, model="local-chat")
    panel.prompt.value = "count to 20"
    panel.send_button.click()
    assert panel.prompt.value == ""
    assert panel.send_button.disabled and not panel.stop_button.disabled
    assert panel.wait(30)
    assert panel.messages == [
        {"role": "user", "content": "count to 20"},
        {"role": "assistant", "content": COUNT},
    ]
    assert "count to 20" in texts(panel)[0] and COUNT in texts(panel)[1]
    assert not panel.send_button.disabled and panel.stop_button.disabled
    assert panel.error is None
    assert "completion tokens" in panel.status.value


def test_conversation_is_multi_turn_and_keeps_the_system_prompt(gw):
    panel = ChatPanel(gw, model="local-chat", system="Answer briefly.")
    panel.ask("My name is Ada.")
    panel.wait(30)
    panel.ask("What is my name?")
    panel.wait(30)
    roles = [m["role"] for m in panel.messages]
    assert roles == ["system", "user", "assistant", "user", "assistant"]
    assert panel.messages[0]["content"] == "Answer briefly."
    assert "Ada" in panel.messages[-1]["content"]


def test_reasoning_model_is_routed_by_the_client(gw):
    panel = ChatPanel(gw, model="local-reasoner")
    panel.ask("what is 6 times 7?")
    panel.wait(30)
    assert panel.error is None, panel.error
    assert "42" in panel.messages[-1]["content"]


def test_stop_ends_the_turn_at_once_and_keeps_what_arrived(gw, until):
    panel = ChatPanel(gw, model="local-chat")
    panel.ask("count to 200")
    until(lambda: panel.reply.text)
    panel.stop_button.click()
    # Stopped at once: the panel is free before the stream thread has even noticed.
    assert not panel.busy and not panel.send_button.disabled
    partial = panel.messages[-1]["content"]
    assert partial and not partial.endswith("200.")
    assert "(stopped)" in texts(panel)[-1]
    assert panel.wait(10), "the stream thread did not end after Stop"
    assert panel.messages[-1]["content"] == partial  # nothing arrived after Stop
    panel.ask("count to 3")  # and the panel goes on
    panel.wait(30)
    assert panel.messages[-1]["content"] == "1, 2, 3."


class _SilentStream(BaseHTTPRequestHandler):
    """Opens an event stream and sends nothing: Stop always comes before any text."""

    def do_POST(self):
        self.rfile.read(int(self.headers["content-length"]))
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        self.wfile.flush()
        time.sleep(3)

    def log_message(self, *args):
        pass


@pytest.fixture
def silent_gw():
    from gatecell import Gateway

    server = ThreadingHTTPServer(("127.0.0.1", 0), _SilentStream)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    with Gateway(base_url=f"http://127.0.0.1:{server.server_port}", api_key="sk-" + "s" * 24) as client:
        yield client
    server.shutdown()


def test_a_turn_stopped_before_any_text_is_taken_back(silent_gw, until):
    panel = ChatPanel(
        silent_gw, models=[SimpleNamespace(id="local-chat", endpoints=None)], model="local-chat"
    )
    panel.prompt.value = "count to 50"
    panel.ask()
    until(lambda: panel.busy)
    panel.stop()
    assert panel.wait(10), "the stream thread did not end after Stop"
    assert panel.messages == []
    assert panel.transcript.children == ()
    assert panel.prompt.value == "count to 50"


def test_gateway_error_is_one_line_and_the_turn_is_taken_back(gw):
    panel = ChatPanel(gw, model="no-such-model")
    panel.ask("hello")
    panel.wait(30)
    assert panel.error and "\n" not in panel.error
    assert "404" in panel.error and "no-such-model" in panel.error
    assert "gatecell-error" in panel.status._dom_classes
    assert panel.messages == [] and panel.prompt.value == "hello"


def test_bad_input_is_refused_before_any_request(gw):
    panel = ChatPanel(gw, model="local-chat")
    panel.ask("   ")
    assert panel.error == "the prompt is empty"
    assert panel.reply is None


def test_clear_and_assigning_messages(gw):
    panel = ChatPanel(gw, model="local-chat")
    panel.messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
    ]
    assert panel.system.value == "Be brief."
    assert len(panel.transcript.children) == 2
    panel.ask("say banana")
    panel.wait(30)
    assert panel.messages[-1]["content"].lower().startswith("banana")
    panel.clear()
    assert panel.messages == [{"role": "system", "content": "Be brief."}]
    assert panel.transcript.children == ()


def test_updates_are_coalesced_but_the_final_text_is_complete(gw):
    panel = ChatPanel(gw, model="local-chat", interval=0.25)
    panel.ask("count to 150")
    panel.wait(30)
    reply = panel.reply
    fragments = 150
    assert reply.text.endswith("150.")
    assert 1 <= reply.updates < fragments / 3
    assert isinstance(panel.transcript.children[-1], widgets.HTMLMath)
    assert "150." in panel.transcript.children[-1].value


def test_sampling_settings_reach_the_request(gw):
    panel = ChatPanel(gw, model="local-chat")
    assert panel.max_tokens.value == "" and panel.max_tokens.placeholder == "no limit"
    panel.temperature.value, panel.top_p.value, panel.max_tokens.value = 0.5, 0.9, "3"
    panel.ask("count to 20")
    panel.wait(30)
    request = panel.reply.request
    assert (request["temperature"], request["top_p"], request["max_tokens"]) == (0.5, 0.9, 3)
    assert panel.messages[-1]["content"] == "1, 2, 3,"  # max_tokens cut the reply, and says so
    assert "(cut at the token limit (finish reason: length))" in panel.transcript.children[-1].value
    assert panel.status.value.endswith("· cut at the token limit (finish reason: length)</span>")
    panel.max_tokens.value = "lots"
    asked = panel.reply
    assert panel.ask("count to 5") is None and panel.reply is asked  # refused before sending
    assert panel.error == "max tokens must be a whole number (empty: no limit), not 'lots'"
    panel.max_tokens.value = "-5"
    assert panel.ask("count to 5") is None and panel.reply is asked
    assert panel.error == "max tokens must be at least 1 (empty: no limit), not '-5'"
    panel.max_tokens.value = "0"  # as good as empty
    panel.ask("count to 5")
    panel.wait(30)
    assert "max_tokens" not in panel.reply.request and panel.messages[-1]["content"] == "1, 2, 3, 4, 5."


def test_models_that_do_not_say_their_endpoints_are_offered_everywhere():
    from gatecell.notebook.widgets._base import model_ids
    from gatecell.wire.transport.results import ModelList

    models = ModelList.from_body(
        {
            "data": [
                {"id": "chat-a", "supported_endpoints": ["/v1/chat/completions"]},
                {"id": "think-b", "supported_endpoints": ["/v1/responses"]},
                {"id": "draw-c", "supported_endpoints": ["/v1/images/generations"]},
                {"id": "mystery-d"},
            ]
        }
    )
    assert model_ids(models, "chat") == ["chat-a", "think-b", "mystery-d"]
    assert model_ids(models, "image") == ["draw-c", "mystery-d"]
    assert model_ids(models, "speech") == ["mystery-d"]


def test_a_panel_opens_and_says_why_when_models_cannot_be_listed():
    from gatecell import Gateway

    with Gateway(base_url="http://127.0.0.1:9", api_key="sk-unused-000000000000", max_retries=0) as gw:
        panel = ChatPanel(gw)
    assert panel.model.options == ()
    assert panel.error.startswith("could not list models:")
    panel.ask("hello")
    assert panel.error == "no model to ask: the gateway listed no chat model"


def test_local_reasoner_introduces_itself_and_its_reasoning_summary_shows(gw):
    panel = ChatPanel(gw, model="local-reasoner")
    panel.ask("Who are you?")
    panel.wait(30)
    assert panel.messages[-1]["content"].startswith("I am local-reasoner, a deterministic")
    bubble = panel.transcript.children[-1].value
    assert "<summary>Reasoning summary</summary>" in bubble and "Read the question (3 words)." in bubble
    assert panel.reply.reasoning.startswith("Read the question")


def test_ctrl_enter_from_the_browser_sends_the_text_it_had(gw):
    """What the keyboard widget's browser code sends on Ctrl+Enter (a custom comm message with
    the box's text), handled as the kernel gets it; the browser side is tests/notebook/widgets/
    browser/test_dashboard.py."""
    from gatecell.notebook.widgets._keys import Listener

    panel = ChatPanel(gw, model="local-chat")
    (keys,) = [w for w in panel.children if isinstance(w, Listener)]
    message = {"method": "custom", "content": {"event": "send", "text": "count to 3"}}
    keys.comm.handle_msg({"content": {"data": message}, "buffers": []})
    panel.wait(30)
    assert panel.messages[-1]["content"] == "1, 2, 3." and panel.prompt.value == ""
