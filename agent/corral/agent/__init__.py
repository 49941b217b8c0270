"""The cluster agent, `corral-agent`: runs in a cluster corral cannot reach, dials out to
corral and carries corral's connections to its own API server through the tunnel
(docs/design/cluster-agent.md). Stands on core only, never on the API server or operator."""
