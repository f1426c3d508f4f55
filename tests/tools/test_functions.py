"""A tool is a plain function: its schema from the signature, its description from the
docstring; what cannot travel as JSON is refused in one line, before any request."""

from __future__ import annotations

import socket
from typing import Annotated, Literal

import pytest
from pydantic import BaseModel, Field, ValidationError

import gatecell
from gatecell.tools import Tool, Toolbox, as_tools, tool
from gatecell.tools.functions import problem
from gatecell.wire.transport.errors import InvalidRequest


class Item(BaseModel):
    sku: str
    quantity: int = 1


def place_order(
    customer: str,
    items: list[Item],
    speed: Literal["normal", "express"] = "normal",
    note: Annotated[str, Field(description="for the courier")] = "",
) -> str:
    """Place an order for a customer.

    Longer text the model does not need.
    """
    return f"{customer}: {len(items)} items, {speed}"


def test_the_schema_comes_from_the_signature_and_the_docstring() -> None:
    made = Tool.of(place_order)
    assert made.name == "place_order"
    assert made.description == "Place an order for a customer."
    schema = made.parameters
    assert schema["type"] == "object" and schema["required"] == ["customer", "items"]
    props = schema["properties"]
    assert props["customer"]["type"] == "string"
    assert props["items"]["type"] == "array" and props["items"]["items"] == {"$ref": "#/$defs/Item"}
    assert schema["$defs"]["Item"]["required"] == ["sku"]
    assert props["speed"]["enum"] == ["normal", "express"] and props["speed"]["default"] == "normal"
    assert props["note"]["description"] == "for the courier"
    assert schema["additionalProperties"] is False


def test_arguments_are_validated_into_the_declared_types() -> None:
    made = Tool.of(place_order)
    arguments = made.arguments({"customer": "Ada", "items": [{"sku": "X", "quantity": "2"}]})
    assert arguments["items"] == [Item(sku="X", quantity=2)] and arguments["speed"] == "normal"
    assert made.function(**arguments) == "Ada: 1 items, normal"
    with pytest.raises(ValidationError) as caught:
        made.arguments({"customer": "Ada", "items": [], "speed": "teleport"})
    assert problem(caught.value).startswith("speed: Input should be 'normal' or 'express', got 'teleport'")
    with pytest.raises(ValidationError) as caught:
        made.arguments({"items": [], "drop_table": 1})
    assert problem(caught.value) == "customer: Field required (and 1 more)"


def test_tool_overrides_and_keeps_the_function_callable() -> None:
    @gatecell.tool(name="status", description="Where an order is.", safe=True)
    def order_status(order_id: str) -> str:
        return order_id.upper()

    assert order_status("a-1") == "A-1"
    (made,) = as_tools([order_status])
    assert (made.name, made.description, made.safe) == ("status", "Where an order is.", True)

    @tool
    def plain(x: int) -> int:
        """Doubles."""
        return 2 * x

    assert as_tools(plain)[0].description == "Doubles."


def test_a_toolbox_gives_its_methods_sharing_its_state() -> None:
    class Counter(Toolbox):
        def __init__(self) -> None:
            self.n = 0

        def add(self, by: int = 1) -> int:
            """Add to the counter."""
            self.n += by
            return self.n

        @tool(name="peek")
        def current(self) -> int:
            return self.n

        def _hidden(self) -> None: ...

    box = Counter()
    tools = {t.name: t for t in as_tools([box])}
    assert set(tools) == {"Counter_add", "peek"}
    assert "self" not in tools["Counter_add"].parameters["properties"]
    tools["Counter_add"].function(**tools["Counter_add"].arguments({"by": 3}))
    assert tools["peek"].function() == 3 == box.n


def variadic(*names: str) -> None: ...


def keywords(**options: str) -> None: ...


def a_socket(host: str, sock: socket.socket) -> None: ...


@pytest.mark.parametrize(
    ("given", "line"),
    [
        (
            variadic,
            "tools: variadic: parameter *names: str cannot be given by name in JSON; use plain parameters",
        ),
        (
            keywords,
            "tools: keywords: parameter **options: str cannot be given by name in JSON; use plain parameters",
        ),
        (a_socket, "tools: a_socket: parameter 'sock' (socket) has no JSON Schema: give it a JSON type"),
        ("order_status", "tools: a tool is a function; got 'order_status'"),
        (
            [place_order, place_order],
            "tools: two tools are named 'place_order'; rename one with gatecell.tool(name=...)",
        ),
    ],
)
def test_what_cannot_be_a_tool_is_one_line(given: object, line: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        as_tools(given if isinstance(given, list) else [given])
    assert str(caught.value) == line


def test_a_bad_tool_is_refused_before_any_request(make) -> None:
    gw = make("one")
    with pytest.raises(InvalidRequest, match="has no JSON Schema"):
        gw.chat("m", [{"role": "user", "content": "hi"}], tools=[a_socket])
    with pytest.raises(InvalidRequest, match="max_rounds: must be a whole number >= 1"):
        gw.chat("m", [{"role": "user", "content": "hi"}], tools=[place_order], max_rounds=0)
    assert gw.received == []
