"""The transport: HTTP in the wire's own types (`http`), the sans-IO exchange with its retries
and redirects (`exchange`), the two drivers that carry it (`drivers` over httpx, the lean
HTTP/1.1 one, `_http11_driver` over `http11`), one proxy router for both (`proxies`,
`_httpx_proxies`), SSE framing (`_sse`), the errors (`errors`), the settings (`settings`) and
the provenance of an answer (`results`). It knows no API: below `gatecell.wire.apis`."""
