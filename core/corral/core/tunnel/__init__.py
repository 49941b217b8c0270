"""The tunnel between corral and a cluster agent (docs/design/cluster-agent.md): HTTP/2
streams in one WebSocket, the bounds and back-pressure on them, the agent's handshake and
credential. Pure: no Kubernetes, no aiohttp; the carrier and the sockets are given."""
