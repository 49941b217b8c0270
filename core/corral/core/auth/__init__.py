"""Authentication: token keys and their hashes, TTL rules, passwords."""
