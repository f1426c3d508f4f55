"""The embedded local gateway: SPEC's endpoints (docs/SPEC.md) served offline by stand-in backends.

`app.create_app` builds the Starlette app, `embedded.start` runs one in this process,
`server.serve` runs one as ``gatecell serve``. Nothing heavy is imported here.
"""
