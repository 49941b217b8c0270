"""An exec through corral's `/k8s` proxy by a client slower than kube-apiserver that pings as it
reads, as kubectl's heartbeat does: what it got (docs/design/cluster-agent.md, section 11).

Slower on purpose: corral then holds back reading from the cluster (flow control), which is
when corral lost the end of a large output, once to its event loop's TLS and once to the
pings it relayed (apiserver/eventloop.py, http/websockets.py)."""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass

import aiohttp

# kubectl's protocol: one byte of channel (1 stdout, 3 the status), then the data.
PROTOCOL = "v5.channel.k8s.io"
STDOUT, STATUS = 1, 3
# The client's pace: a pause, and a ping, after each MiB read.
PACE = 2**20
PAUSE = 0.02


@dataclass
class Got:
    stdout: int  # bytes
    status: bytes  # the Status kube-apiserver sent on its channel
    close: int | None  # the close frame's code, None when there was none


async def _run(url: str, token: str, context: ssl.SSLContext, size: int) -> Got:
    stdout, status, close = 0, b"", None
    paced = PACE
    async with (
        aiohttp.ClientSession() as session,
        session.ws_connect(
            url, protocols=(PROTOCOL,), headers={"Authorization": f"Bearer {token}"},
            ssl=context, autoclose=False, max_msg_size=0,
        ) as socket,
    ):  # fmt: skip
        async for message in socket:
            if message.type != aiohttp.WSMsgType.BINARY:
                continue
            if message.data[0] == STDOUT:
                stdout += len(message.data) - 1
            elif message.data[0] == STATUS:
                status += message.data[1:]
            if paced <= stdout < size:  # (after the last byte, corral may be closing)
                paced += PACE
                await socket.ping()
                await asyncio.sleep(PAUSE)  # the slow reader itself, not a wait for anything
        if socket.close_code is not None:
            close = socket.close_code
    return Got(stdout, status, close)


def slow_exec(
    base: str, token: str, context: ssl.SSLContext, cluster: str, namespace: str, pod: str,
    size: int,
) -> Got:  # fmt: skip
    """`head -c size /dev/zero` run in the pod, read through corral at the slow client's pace."""
    url = (
        f"{base}/k8s/clusters/{cluster}/api/v1/namespaces/{namespace}/pods/{pod}/exec"
        f"?command=head&command=-c&command={size}&command=/dev/zero&stdout=true&stderr=true"
    )
    return asyncio.run(_run(url, token, context, size))
