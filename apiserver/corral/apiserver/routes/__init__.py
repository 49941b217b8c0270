"""One module per family of routes."""
