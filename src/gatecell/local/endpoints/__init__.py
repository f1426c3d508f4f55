"""HTTP handlers, one module per family of SPEC 4 endpoints."""
