"""Panels as part of the notebook: a chat panel sharing a conversation with ``%%chat``, panels
over an `AsyncGateway` (on a loop of their own), and the voices and sizes a gateway lists."""

from __future__ import annotations

import asyncio

from gatecell import AsyncGateway, Gateway
from gatecell.notebook.widgets import ChatPanel, Dashboard, ImagePanel, MediaPanel, SpeechPanel


def bubbles(panel: ChatPanel) -> list[str]:
    return [b.value for b in panel.transcript.children]


# -- one conversation for the magics and the panel ------------------------------------------


def test_a_panel_continues_what_chat_cells_built_and_the_other_way_round(run, ipshell, gc, local_gateway):
    run('%%chat -s "Answer like a pirate."\nMy name is Ada.')
    gw = Gateway(base_url=local_gateway.base_url, api_key=local_gateway.api_key)
    panel = ChatPanel(gw, model="local-chat", conversation="default")
    assert panel.system.value == "Answer like a pirate."
    shown = bubbles(panel)
    assert len(shown) == 2 and "My name is Ada." in shown[0] and "Arr! Nice to meet you, Ada." in shown[1]

    panel.ask("What is my name?")
    assert panel.wait(30)
    assert panel.reply.request["messages"][0] == {"role": "system", "content": "Answer like a pirate."}
    assert panel.messages[-1]["content"] == "Arr! Your name is Ada."  # the cell's turn was sent

    result, _ = run("%chat repeat after me: the panel said so")
    conversation = gc.session.memory.get("default")
    assert [t.role for t in conversation.turns] == ["system", *["user", "assistant"] * 3]
    assert conversation.turns[4].content == "Arr! Your name is Ada."  # the panel's turn, in the magics'
    assert len(bubbles(panel)) == 6 and "the panel said" in bubbles(panel)[-2]  # refreshed after the cell

    panel.system.value = "Answer in uppercase."
    result, _ = run("%chat what is my name?")
    assert result.result == "YOUR NAME IS ADA."  # the box is the conversation's system prompt

    run("%gatecell reset")
    assert bubbles(panel) == [] and panel.messages == []
    gw.close()


def test_a_panel_made_before_the_extension_loads_shares_the_same_memory(ipshell, local_gateway, monkeypatch):
    from gatecell.notebook import _OWN_SESSIONS, _STATE, session_for

    ipshell.run_line_magic("unload_ext", "gatecell")
    try:
        gw = Gateway(base_url=local_gateway.base_url, api_key=local_gateway.api_key)
        panel = ChatPanel(gw, model="local-chat", conversation="notes")
        panel.ask("My name is Grace.")
        assert panel.wait(30)
    finally:
        ipshell.run_line_magic("load_ext", "gatecell")
    assert id(ipshell) not in _OWN_SESSIONS and session_for(ipshell) is _STATE[id(ipshell)]["magics"].session
    assert session_for(ipshell).memory.get("notes").turns[0].content == "My name is Grace."
    gw.close()


def test_a_reply_the_magics_kept_is_rendered_inert_in_the_panel(gc):
    hostile = "# Heading\n\n| a |\n|---|\n| 1 |\n\n<script>alert(1)</script> <img src=x onerror=alert(2)>"
    gc.session.memory.get("default").add("show me", hostile, prov={"model": '"><img src=x onerror=alert(3)>'})
    panel = ChatPanel(models=[], conversation="default")
    html = " ".join(bubbles(panel))
    assert "<h1>Heading</h1>" in html and "<table>" in html
    assert "<script" not in html and "<img" not in html  # shown as text: &lt;script&gt;, &lt;img
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "&quot;&gt;&lt;img src=x" in html


# -- AsyncGateway ---------------------------------------------------------------------------


def test_panels_drive_an_async_gateway_on_a_loop_of_their_own(local_gateway):
    async def notebook() -> None:
        agw = AsyncGateway(base_url=local_gateway.base_url, api_key=local_gateway.api_key, stream_usage=True)
        board = Dashboard(agw)
        assert board.chat.gateway is board.image.gateway  # one bridge, one loop for the panels
        assert board.chat.gateway.loop is not asyncio.get_running_loop()
        board.chat.model.value = "local-chat"
        board.chat.ask("count to 5")
        board.compare.run("what is 6 times 7?", ["local-chat", "local-reasoner"])
        board.image.generate("a red square")
        job = board.media.submit("music", "a calm tune", style="ambient")
        board.speech.speak("hello")
        # the notebook's own loop goes on, and may use the same AsyncGateway meanwhile
        reply = await agw.chat(model="local-chat", messages=[{"role": "user", "content": "what is 2+2?"}])
        assert reply.choices[0].message.content == "2+2 = 4"
        panels = (board.chat, board.compare, board.image, board.speech, job)
        await asyncio.to_thread(lambda: [p.wait(60) for p in panels])
        assert board.chat.messages[-1]["content"] == "1, 2, 3, 4, 5."
        assert all("42" in r["text"] and r["error"] is None for r in board.compare.results.values())
        assert "completion tokens" in board.chat.status.value
        assert board.image.images and board.image.error is None
        assert board.speech.audio.data[:4] == b"RIFF"
        assert job.error is None and job.media
        await agw.aclose()

    asyncio.run(notebook())


def test_an_async_stream_leaves_the_notebook_loop_free_and_stops_at_once(fault_server):
    fault_server.mode = "slow"  # an endless stream: a word every 20 ms

    async def notebook() -> None:
        agw = AsyncGateway(base_url=fault_server.base_url, api_key=fault_server.key, max_retries=0)
        panel = ChatPanel(agw, model="fault-chat")
        panel.ask("hello")
        seen: list[int] = []  # the reply's length at each turn of the notebook's loop

        async def watch() -> None:
            while len(set(seen)) < 4:
                await asyncio.sleep(0.005)
                seen.append(len(panel.reply.text))

        await asyncio.wait_for(watch(), 30)  # a deadline for a hang, not a timing claim
        assert panel.busy  # it streamed on while the loop ran: the loop's turns saw it grow
        panel.stop()
        assert not panel.busy and panel.messages[-1]["content"].startswith("word0 word1")
        assert await asyncio.to_thread(panel.wait, 10), "the stream's thread did not end after Stop"
        await agw.aclose()

    asyncio.run(notebook())


# -- what a gateway lists -----------------------------------------------------------------


def test_voice_and_size_fields_offer_what_the_gateway_lists(fault_server, monkeypatch):
    monkeypatch.setattr(
        type(fault_server),
        "models",
        [
            {"id": "tts-listed", "voices": ["marin", {"id": "cedar"}, {"name": "nova"}, 7, ""]},
            {"id": "tts-plain"},
            {"id": "img-listed", "supported_sizes": ["256x256", "1536x1024"]},
        ],
    )
    with Gateway(base_url=fault_server.base_url, api_key=fault_server.key) as gw:
        speech = SpeechPanel(gw, model="tts-listed")
        assert speech.voice.options == ("marin", "cedar", "nova")
        speech.model.value = "tts-plain"  # lists none: the common names, and any text goes
        assert "alloy" in speech.voice.options and not speech.voice.ensure_option
        image = ImagePanel(gw, model="img-listed")
        assert image.size.options == ("256x256", "1536x1024")
        assert MediaPanel(gw).models == SpeechPanel(gw).models  # every panel keeps the list it got
