"""The key never enters any widget's synced state (what the browser and saved notebooks get)."""

from __future__ import annotations

import json
import secrets

from ipywidgets.widgets.widget import _instances

from gatecell import Gateway
from gatecell.notebook.widgets import ChatPanel, dashboard


def synced_state() -> bytes:
    """The state of every live widget, as it would be sent to a frontend."""
    chunks = []
    for widget in list(_instances.values()):
        for name, value in widget.get_state().items():
            if isinstance(value, (bytes, bytearray, memoryview)):
                chunks.append(bytes(value))
            else:
                chunks.append(f"{name}={json.dumps(value, default=str)}".encode())
    return b"\n".join(chunks)


def leaks(key: str) -> bool:
    state = synced_state()
    return key.encode() in state or key.removeprefix("sk-").encode() in state


def test_the_detector_finds_a_key_in_widget_state():
    import ipywidgets as widgets

    key = "sk-" + secrets.token_urlsafe(24)
    probe = widgets.Label(f"oops {key}")
    assert leaks(key)
    probe.close()
    assert not leaks(key)


def test_a_used_dashboard_holds_no_key(gw, local_gateway):
    key = local_gateway.api_key.reveal()
    board = dashboard(gw)
    board.chat.ask("count to 5")
    board.compare.run("say hi", ["local-chat", "local-reasoner"])
    board.image.generate("a green dot")
    board.speech.speak("hi")
    for panel in (board.chat, board.compare, board.image, board.speech):
        panel.wait(60)
    assert board.chat.messages[-1]["content"] == "1, 2, 3, 4, 5."
    assert board.image.images
    assert "gatecell" in board.header.value and "local-chat" in board.chat.model.options
    assert not leaks(key)


def test_a_rejected_key_is_not_shown_in_the_error(local_gateway):
    wrong = "sk-" + secrets.token_urlsafe(24)
    with Gateway(base_url=local_gateway.base_url, api_key=wrong) as gw:
        panel = ChatPanel(gw, model="local-chat")  # listing models fails: 401
        assert panel.error and "401" in panel.error
        panel.ask("hello")
        panel.wait(30)
        assert "401" in panel.error
    assert not leaks(wrong)
