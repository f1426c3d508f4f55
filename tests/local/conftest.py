"""Helpers for the local gateway's tests (`make_gateway` is in tests/conftest.py)."""

from __future__ import annotations

import httpx
import openai
import pytest


@pytest.fixture
def http(local_gateway):
    """An httpx client on the session gateway, authenticated with its key."""
    headers = {"authorization": f"Bearer {local_gateway.api_key.reveal()}"}
    with httpx.Client(base_url=local_gateway.base_url, headers=headers, timeout=30) as client:
        yield client


@pytest.fixture
def client(local_gateway):
    """The openai SDK on the session gateway, configured as its users do (base_url ending in /v1)."""
    with openai.OpenAI(
        base_url=f"{local_gateway.base_url}/v1", api_key=local_gateway.api_key.reveal(), max_retries=0
    ) as c:
        yield c
