"""The API dialects: which API a path is (`names`, one list of the text APIs), each text API's
details (`dialects`), SPEC's request and answer models (`spec`), conversations and content
parts (`conversation`, `attachments`), stream decoders (`_decoders`), streams (`streams`), the
reasoning router (`routing`) and jobs (`jobs`). Above the transport, below typed answers."""
