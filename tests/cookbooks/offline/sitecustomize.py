"""Loaded by every Python process a cookbook test starts (the kernel, `sovseal serve`, `sovseal mcp`),
through PYTHONPATH: an audit hook that refuses any network connection or name lookup beyond this
machine, and writes each attempt to ``$COOKBOOK_NET_LOG``, so a cookbook that reaches for the network
fails its test even if it catches the error ("runs offline", issue 10). Loopback stays allowed: the
two-devices cookbook talks to its own server on 127.0.0.1."""

from __future__ import annotations

import ipaddress
import os
import sys

_LOG = os.environ.get("COOKBOOK_NET_LOG")
_LOCAL_NAMES = {None, "", "localhost", "localhost.localdomain", "ip6-localhost"}


def _is_local(host: object) -> bool:
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if host in _LOCAL_NAMES:
        return True
    try:
        return ipaddress.ip_address(str(host).split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def _refuse(event: str, target: object) -> None:
    if _LOG:
        with open(_LOG, "a", encoding="utf-8") as log:
            log.write(f"{os.getpid()} {event} {target!r}\n")
    raise OSError(f"cookbooks run offline: {event} to {target!r} refused")


def _guard(event: str, args: tuple) -> None:
    if event == "socket.connect":
        address = args[1]
        if isinstance(address, tuple) and not _is_local(address[0]):
            _refuse(event, address)
    elif event in ("socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyname_ex") and not _is_local(args[0]):
        _refuse(event, args[0])


if _LOG:
    sys.addaudithook(_guard)
