"""Hosts corral must not be sent to on a user's word: the link-local range, where clouds serve
instance metadata (and the credentials of the machine corral runs on), and the names those
services go by. An S3 endpoint or an OpenID Connect issuer there would make corral's own pods
fetch them, and a refused or answered request says what is there.

Only what the text itself says is judged: literal addresses (in every form the C resolver
accepts, `2852039166` and `0xa9.0xfe.0xa9.0xfe` included) and the known names. A name is not
resolved here: what it resolves to at check time can change before it is used, so the answer
would prove nothing; the network's egress rules are the defence against names that resolve
there later.
"""

from __future__ import annotations

import ipaddress
import socket

# Link-local ranges, and metadata services outside them: AWS's IPv6 one and Alibaba's.
_RANGES = tuple(
    ipaddress.ip_network(n)
    for n in ("169.254.0.0/16", "fe80::/10", "fd00:ec2::254/128", "100.100.100.200/32")
)
# Names of metadata services, compared without case or a trailing dot.
_NAMES = frozenset(
    {
        "metadata",
        "metadata.google.internal",
        "metadata.goog",
        "instance-data",
        "instance-data.ec2.internal",
    }
)


def is_metadata_host(host: str) -> bool:
    """Whether `host` (a name or an address, IPv6 with or without brackets) is a link-local
    address or a cloud metadata service's address or name."""
    text = host.strip().strip("[]").rstrip(".").lower()
    if text in _NAMES:
        return True
    address = _address(text)
    if address is None:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return any(address in network for network in _RANGES)


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text.split("%", 1)[0])  # fe80::1%eth0: a zone
    except ValueError:
        pass
    # Shorthand IPv4 (decimal, octal or hex parts, fewer than four) is what getaddrinfo does
    # with such a name, so it is that address. inet_aton parses only: no lookup.
    if text and all(c in "0123456789abcdefx." for c in text):
        try:
            return ipaddress.IPv4Address(socket.inet_aton(text))
        except OSError:
            return None
    return None
