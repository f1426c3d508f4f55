"""The wire: settings, schemas, SSE and the HTTP client. Depends on httpx and pydantic only."""
