"""The per-cluster agent and what it keeps in step with a downstream cluster: health, node
mirror, drains, project sync. Never imports `corral.operator.management`."""
