"""The address family a server listens with, from its ``host`` setting (IPv4 or IPv6).

``http.server``'s servers listen on IPv4 only (``address_family = AF_INET``): ``server.host: "::"``
in an IPv6-only cluster, where the kubelet's probes and Prometheus come over IPv6, was refused as
"an address this host does not have" (until 2026-12-07). ``server_class`` gives a server class the
family the host needs; on ``::`` it also accepts IPv4 (dual stack), as ``0.0.0.0`` does for IPv4.
"""

from __future__ import annotations

import contextlib
import socket
from typing import Any, TypeVar

S = TypeVar("S")


def listen_host(host: str) -> str:
    """``host`` without the brackets of an IPv6 literal in URL form (``[::1]`` -> ``::1``)."""
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


def listen_family(host: str) -> socket.AddressFamily:
    """IPv6 for an IPv6 address (``::``, ``fd00::1``) or a name that resolves to IPv6 only; else
    IPv4 (also when the name does not resolve: binding then says what is wrong)."""
    name = listen_host(host) or None
    try:
        found = {info[0] for info in socket.getaddrinfo(name, None, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)}
    except (socket.gaierror, UnicodeError):
        return socket.AF_INET
    return socket.AF_INET6 if socket.AF_INET not in found and socket.AF_INET6 in found else socket.AF_INET


def server_class(base: type[S], host: str) -> type[S]:
    """``base`` itself for an IPv4 host; for an IPv6 one, a subclass listening on IPv6 (dual stack:
    IPv4 too, where the host allows it)."""
    if listen_family(host) != socket.AF_INET6:
        return base

    def server_bind(self: Any) -> None:
        with_v4 = getattr(socket, "IPV6_V6ONLY", None)
        if with_v4 is not None:
            with contextlib.suppress(OSError):  # a host without dual stack: IPv6 only
                self.socket.setsockopt(socket.IPPROTO_IPV6, with_v4, 0)
        base.server_bind(self)  # type: ignore[attr-defined]

    return type(base.__name__, (base,), {"address_family": socket.AF_INET6, "server_bind": server_bind})
