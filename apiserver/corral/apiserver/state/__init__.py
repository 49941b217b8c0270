"""The caches the API server reads from: management objects and downstream clusters' objects."""
