"""The vocabulary: names, ids, condition types and reasons. Pure, and standing on
nothing else of core but its errors."""
