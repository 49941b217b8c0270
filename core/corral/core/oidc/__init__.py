"""Talking to an OpenID Connect provider (`provider`): the only code that does."""
