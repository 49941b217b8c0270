"""The HTTP layer: the wire envelope, the error body, schemas, request bodies and queries."""
