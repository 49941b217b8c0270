"""Talking to GitHub for the GitHub sign-in provider (`client`): the only code that does."""
