"""One policy for "which gateway" (gatecell.connect), seen from fresh processes.

The notice is once per process, so each case runs in a subprocess of its own.
"""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
import textwrap

from gatecell.connect import NOTICE

URL = re.compile(r"http://127\.0\.0\.1:\d+")


def run_python(script: str, **env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("GATECELL_", "OPENAI_"))}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_gateway_with_nothing_configured_starts_the_embedded_gateway_and_says_so_once():
    key = "sk-local-" + secrets.token_urlsafe(24)  # the embedded gateway's key, made known here
    done = run_python(
        """
        import asyncio
        from gatecell import AsyncGateway, Gateway
        from gatecell.local import embedded

        hi = [{"role": "user", "content": "What is 2+2?"}]
        gw = Gateway()
        print(gw.chat(model="local-chat", messages=hi).text)

        async def main():
            async with AsyncGateway() as agw:
                print((await agw.chat(model="local-chat", messages=hi)).text)
                return agw.base_url

        same = asyncio.run(main()) == gw.base_url == embedded.start().base_url
        print("one gateway:", same, repr(gw))
        """,
        GATECELL_LOCAL_KEYS=key,
    )
    assert done.returncode == 0, done.stderr
    (line,) = done.stderr.splitlines()  # once, for two clients
    url = URL.search(line).group(0)
    assert line == NOTICE.format(url=url)
    assert done.stdout.splitlines()[:3] == [
        "2+2 = 4",
        "2+2 = 4",
        f"one gateway: True Gateway(base_url='{url}', api_key=Secret('sk-…{key[-4:]}'))",
    ]
    assert key not in done.stdout + done.stderr


def test_a_local_gateway_handed_down_by_gatecell_lab_is_used_not_started(local_gateway):
    """What a kernel of ``gatecell lab`` sees: GATECELL_LOCAL_URL and GATECELL_LOCAL_KEYS."""
    done = run_python(
        """
        from IPython.testing.globalipapp import start_ipython
        from gatecell import Gateway
        from gatecell.local import embedded
        from gatecell.notebook import session_for

        session = session_for(start_ipython())
        print(session.describe())
        gw = Gateway()
        print(gw.base_url, gw.chat(model="local-chat", messages=[{"role": "user", "content": "hi"}]).text[:5])
        session.gateway.models()
        print(session.describe())
        print("started here:", embedded._current is not None)
        """,
        GATECELL_LOCAL_URL=local_gateway.base_url + "/v1/",
        GATECELL_LOCAL_KEYS=local_gateway.api_key.reveal(),
    )
    assert done.returncode == 0, done.stderr
    url = local_gateway.base_url
    before, used, after, started = done.stdout.splitlines()
    assert before == str(
        {"gateway": f"{url} (local gateway of gatecell lab)", "api key": "the local gateway's own"}
    )
    assert used == f"{url} Hello"
    assert after == str({"gateway": f"{url} (local gateway)", "api key": "the local gateway's own"})
    assert started == "started here: False"
    assert done.stderr.splitlines() == [NOTICE.format(url=url)]  # one notice for the client and the session
    assert local_gateway.api_key.reveal() not in done.stdout + done.stderr


def test_configured_settings_win_and_say_nothing(local_gateway):
    done = run_python(
        """
        from gatecell import Gateway
        from gatecell.local import embedded

        print(Gateway().base_url, Gateway("http://127.0.0.1:9/v1").base_url, embedded.running())
        """,
        GATECELL_BASE_URL=local_gateway.base_url,
        GATECELL_API_KEY=local_gateway.api_key.reveal(),
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [local_gateway.base_url, "http://127.0.0.1:9", "None"]
    assert done.stderr == ""


def test_the_wire_loads_nothing_above_it_and_the_client_no_local_gateway_until_needed():
    done = run_python(
        """
        import sys
        above = ("gatecell.local", "gatecell.connect", "gatecell.store", "gatecell.batch", "gatecell.journal")
        import gatecell.wire.endpoints, gatecell.wire.transport.drivers
        print(sorted(m for m in sys.modules if m.startswith(above)))
        import gatecell.gateway
        print(sorted(m for m in sys.modules if m.startswith(("gatecell.local", "gatecell.store"))))
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["[]", "[]"]


def test_a_client_made_with_nothing_configured_starts_the_local_gateway_on_its_first_request():
    done = run_python(
        """
        from gatecell import Gateway
        from gatecell.local import embedded

        gw = Gateway()
        print(repr(gw), embedded.running(), gw.local)
        print(gw.chat("local-chat", [{"role": "user", "content": "What is 2+2?"}]).text)
        print(embedded.running().base_url == gw.base_url)
        """
    )
    assert done.returncode == 0, done.stderr
    made, reply, same = done.stdout.strip().split("\n")
    assert made == "Gateway(base_url=<the local gateway, on first request>, api_key=None) None True"
    assert "4" in reply and same == "True"
    assert done.stderr.count("gatecell: no gateway configured") == 1
