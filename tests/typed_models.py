"""Models of the typed-answer tests (`tests/wire/test_structured.py`, `tests/local/test_typed.py`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel


class Review(BaseModel):
    """A product review, read."""

    sentiment: Literal["positive", "negative", "neutral"]
    product: str
    stars: int


class Person(BaseModel):
    name: str
    born: int | None = None
    email: str | None = None
