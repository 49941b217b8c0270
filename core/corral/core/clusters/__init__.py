"""Downstream clusters: their credentials, importing them, and reading their state."""
