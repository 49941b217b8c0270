"""Rules and side effects shared by routes; a route parses, calls these, renders."""
