"""The wire: everything between a call and the gateway, in packages by what they are, each
using only those below it (``lint-imports`` holds it):

- `gatecell.wire.calls` and `gatecell.wire.endpoints`: the client's endpoints, as programs;
- `gatecell.wire.typed`: calls of several rounds, typed answers first;
- `gatecell.wire.apis`: each API's dialect, SPEC's models, conversations, streams;
- `gatecell.wire.transport`: HTTP, the exchange, the two drivers, proxies, errors;
- `gatecell.wire.util`: secrets, private files, terminal and Markdown text.

"SPEC n.n" in this package's docstrings is a section of the gateway contract,
``docs/SPEC.md``; "WIRE-NOTES" is ``docs/WIRE-NOTES.md``, what real gateways send where
SPEC says "not shown". Both are kept in the repository.
"""
