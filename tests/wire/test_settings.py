"""One parser of numeric and flag settings from the environment, with one failure mode: a
`ConfigError` naming the variable. The client, the magics' defaults and the local gateway
all read through it."""

from __future__ import annotations

import pytest

from gatecell.wire.transport.errors import ConfigError
from gatecell.wire.transport.settings import env_flag, env_number


@pytest.mark.parametrize(
    "raw, default, value",
    [
        (None, 2.5, 2.5),
        ("", 2.5, 2.5),
        (" 0.25 ", 2.5, 0.25),
        ("3", 2.5, 3.0),
        ("7", 1, 7),
        ("1e6", 1, 1_000_000),
    ],
)
def test_numbers(monkeypatch, raw, default, value):
    if raw is not None:
        monkeypatch.setenv("GATECELL_X", raw)
    got = env_number(None, "GATECELL_X", default)
    assert got == value and type(got) is type(default)
    assert env_number(9, "GATECELL_X", default) == 9  # an explicit value wins


@pytest.mark.parametrize(
    "raw, default, kind",
    [
        ("soon", 1.0, "number"),
        ("-1", 1.0, "number"),
        ("nan", 1.0, "number"),
        ("inf", 1.0, "number"),
        ("2.5", 1, "whole number"),
    ],
)
def test_a_bad_number_is_one_config_error_naming_the_variable(monkeypatch, raw, default, kind):
    monkeypatch.setenv("GATECELL_X", raw)
    with pytest.raises(ConfigError, match=rf"^GATECELL_X must be a non-negative {kind}, got '{raw}'$"):
        env_number(None, "GATECELL_X", default)


def test_flags(monkeypatch):
    assert env_flag(None, "GATECELL_F") is False and env_flag(None, "GATECELL_F", True) is True
    for raw, value in [
        ("1", True),
        ("Yes", True),
        ("on", True),
        ("0", False),
        ("FALSE", False),
        ("off", False),
    ]:
        monkeypatch.setenv("GATECELL_F", raw)
        assert env_flag(None, "GATECELL_F") is value
        assert env_flag(not value, "GATECELL_F") is (not value)
    monkeypatch.setenv("GATECELL_F", "sometimes")
    with pytest.raises(
        ConfigError, match=r"^GATECELL_F must be one of 1, true, yes, on, 0, false, no, off; got 'sometimes'$"
    ):
        env_flag(None, "GATECELL_F")


def test_the_client_the_magics_and_the_local_gateway_fail_alike(monkeypatch):
    from gatecell.gateway import Gateway
    from gatecell.local.config import Config
    from gatecell.notebook.config import Gatecell

    cases = [
        ("GATECELL_TIMEOUT", lambda: Gateway("http://127.0.0.1:9", "sk-x")),
        ("GATECELL_UPDATE_INTERVAL", lambda: Gatecell().update_interval),
        ("GATECELL_LOCAL_PACE", lambda: Config.create("sk-local-0000000000")),
    ]
    for name, read in cases:
        monkeypatch.setenv(name, "fast")
        with pytest.raises(ConfigError, match=rf"^{name} must be a non-negative number, got 'fast'$"):
            read()
        monkeypatch.delenv(name)
    monkeypatch.setenv("GATECELL_FOOTER", "maybe")
    with pytest.raises(ConfigError, match="^GATECELL_FOOTER must be one of"):
        _ = Gatecell().footer
