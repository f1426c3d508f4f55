"""Tools: the model calls your Python functions (and MCP servers' tools), with your say.

``gw.chat(..., tools=[order_status, weather])`` offers the functions to the model, runs the
calls it makes (`runner`), sends the results back and repeats until the model answers
(`loop`), on every text API (`dialects`). A function's JSON Schema comes from its signature
(`functions`); `tool` overrides its name, description, or marks it safe; a `Toolbox` gives
the methods of one object. See docs/guide/tools.md.
"""

from __future__ import annotations

from .functions import Tool, Toolbox, as_tools, tool
from .loop import Chain
from .runner import ToolCall, ToolCalls

__all__ = ["Tool", "Toolbox", "tool", "as_tools", "Chain", "ToolCall", "ToolCalls"]
