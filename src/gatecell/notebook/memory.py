"""Conversation memory: one default conversation per notebook, named ones side by side.

A turn joins a conversation only when its reply is in: complete, or, when a stream was
interrupted or cut, with the partial text marked ``partial`` so that the history says
so. The messages sent to a gateway carry only ``role`` and ``content``. A question with
pictures or files keeps them (its content is a list of text and `Attachment` items, each
encoded once), so that a later question about the same figure is sent with it, on
whichever API the conversation goes on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Turn", "Conversation", "Memory"]


@dataclass
class Turn:
    role: str  # "system" | "user" | "assistant"
    content: Any  # its text, or a list of text and `Attachment` items
    partial: bool = False
    prov: dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        """The content for a person to read: each picture or file as one line saying what it is."""
        if isinstance(self.content, str):
            return self.content
        from gatecell.wire.apis.conversation import content_text

        return content_text(self.content)


@dataclass
class Conversation:
    name: str
    turns: list[Turn] = field(default_factory=list)

    def set_system(self, text: str) -> None:
        """Put (or replace) the system prompt at the head of the conversation."""
        if self.turns and self.turns[0].role == "system":
            self.turns[0].content = text
        else:
            self.turns.insert(0, Turn("system", text))

    def messages(self, prompt: Any) -> list[dict[str, Any]]:
        """The history plus the new user prompt, in the wire's message form (SPEC 2.2; a
        content with pictures is a list, made each API's parts by `wire.conversation`)."""
        return [{"role": t.role, "content": t.content} for t in self.turns] + [
            {"role": "user", "content": prompt}
        ]

    def add(
        self, prompt: Any, reply: str, *, partial: bool = False, prov: dict[str, Any] | None = None
    ) -> tuple[Turn, Turn]:
        """Add a question and its reply at once (a panel's thread and a cell may share the
        conversation: the two turns stay together); return them."""
        turns = (Turn("user", prompt), Turn("assistant", reply, partial=partial, prov=prov or {}))
        self.turns.extend(turns)
        return turns

    def markdown(self) -> str:
        """The conversation as Markdown, for ``%gatecell history``: each turn's text quoted
        under its role, so that a reply's own headings, lists and code keep their form.
        It is shown through `gatecell.notebook.markdown`, like every reply."""
        from .markdown import escape

        turns = sum(t.role == "user" for t in self.turns)
        lines = [f"**conversation {escape(self.name)}** ({turns} turns)"]
        for t in self.turns:
            mark = " *(partial: interrupted)*" if t.partial else ""
            quoted = "\n".join(f"> {line}" for line in t.text.splitlines()) or ">"
            lines.append(f"**{t.role}**{mark}\n{quoted}")
        return "\n\n".join(lines)


class Memory:
    """All conversations of a notebook, by name."""

    def __init__(self) -> None:
        self.conversations: dict[str, Conversation] = {}

    def get(self, name: str = "default") -> Conversation:
        if name not in self.conversations:
            self.conversations[name] = Conversation(name)
        return self.conversations[name]

    def reset(self, name: str | None = None) -> list[str]:
        """Forget one conversation, or all of them (``None``); return the names forgotten."""
        names = list(self.conversations) if name is None else [n for n in [name] if n in self.conversations]
        for n in names:
            del self.conversations[n]
        return names
