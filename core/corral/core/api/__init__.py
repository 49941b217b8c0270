"""The vocabulary: names, ids, labels, condition types and reasons. Pure, and standing on
nothing else of core but its errors."""
