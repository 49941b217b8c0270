"""The vocabulary: names, ids, condition types and reasons, the settings catalog. Pure."""
