"""Calls of several rounds (`rounds`: send, read the answer, decide the next round) and their
first policy, typed answers (`typed_calls`, with the schemas and readers of `structured`).
Above the API dialects, below the client (`gatecell.wire.calls`, `gatecell.wire.endpoints`)."""
