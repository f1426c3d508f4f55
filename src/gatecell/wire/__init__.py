"""The wire: settings, schemas, SSE and the HTTP client. Depends on httpx and pydantic only.

"SPEC n.n" in this package's docstrings is a section of the gateway contract,
``docs/SPEC.md``; "WIRE-NOTES" is ``docs/WIRE-NOTES.md``, what real gateways send where
SPEC says "not shown". Both are kept in the repository.
"""
