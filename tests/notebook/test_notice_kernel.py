"""The one-time notice that the local gateway serves, in a real kernel: a small display of its
own, never stderr (which Jupyter shows on a red background, as if the first cell had failed)."""

from __future__ import annotations

import re

from kernels import displays, execute, running, stream_text

from gatecell.connect import NOTICE


def test_a_kernel_shows_the_notice_once_as_a_muted_display_and_nothing_on_stderr(tmp_path):
    hi = "[{'role': 'user', 'content': 'What is 2+2?'}]"
    with running(tmp_path) as kc:
        built = "from gatecell import Gateway\ngw = Gateway()\nprint(repr(gw)[:8])"
        reply, messages = execute(kc, built)
        assert displays(messages) == [] and stream_text(messages, "stderr") == ""  # no request yet
        reply, messages = execute(kc, f"print(gw.chat(model='local-chat', messages={hi}).text)")
        assert reply["content"]["status"] == "ok", stream_text(messages, "stderr")
        (notice,) = displays(messages)
        text = notice["content"]["data"]["text/plain"]
        url = re.search(r"http://127\.0\.0\.1:\d+", text).group(0)
        assert text == NOTICE.format(url=url)
        assert "set GATECELL_BASE_URL and GATECELL_API_KEY" in text  # how to point at a real gateway
        html = notice["content"]["data"]["text/html"]
        assert html.startswith(
            '<div class="gatecell-notice" style="font-size:smaller;opacity:0.7">gatecell: '
        )
        assert "%config Gatecell.base_url = &#x27;...&#x27;" in html and "'" not in html.split(">", 1)[1]
        assert set(notice["content"]["data"]) == {"text/plain", "text/html"}
        assert stream_text(messages, "stderr") == "" and stream_text(messages, "stdout") == "2+2 = 4\n"

        reply, messages = execute(kc, "%%chat\nWhat is 3+3?")  # the magics' own client: said once only
        assert reply["content"]["status"] == "ok"
        assert stream_text(messages, "stderr") == ""
        assert not [m for m in displays(messages) if "local gateway" in m["content"]["data"]["text/plain"]]
