"""A small WebSocket client (RFC 6455), enough to read the gateway's
event streams: text messages, ping/pong, close. Standard library only."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import socket
import ssl
import struct
import urllib.parse
from typing import Any, Dict, Iterator

_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


class _Conn:
    def __init__(self, url: str, token: str, timeout: float):
        u = urllib.parse.urlsplit(url)
        if u.scheme not in ("ws", "wss"):
            raise ValueError(f"websocket URL {url!r}: want ws:// or wss://")
        port = u.port or (443 if u.scheme == "wss" else 80)
        sock = socket.create_connection((u.hostname, port), timeout=timeout)
        if u.scheme == "wss":
            sock = ssl.create_default_context().wrap_socket(sock, server_hostname=u.hostname)
        self.sock = sock
        self.buf = b""
        key = base64.b64encode(os.urandom(16)).decode()
        path = u.path + ("?" + u.query if u.query else "")
        req = (f"GET {path} HTTP/1.1\r\nHost: {u.netloc}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bearer {token}\r\n\r\n")
        sock.sendall(req.encode())
        head = self._read_until(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ")[1])
        headers = {}
        for ln in lines[1:]:
            k, _, v = ln.partition(":")
            headers[k.strip().lower()] = v.strip()
        if status != 101:
            body = self.buf
            n = int(headers.get("content-length", "0") or 0)
            while len(body) < n:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                body += chunk
            sock.close()
            from .client import RollcageError
            try:
                msg = json.loads(body).get("error", body.decode(errors="replace"))
            except ValueError:
                msg = body.decode(errors="replace").strip()
            raise RollcageError(status, msg)
        want = base64.b64encode(hashlib.sha1((key + _GUID).encode()).digest()).decode()
        if headers.get("sec-websocket-accept") != want:
            sock.close()
            raise ConnectionError("websocket handshake: bad Sec-WebSocket-Accept from the gateway")

    def _read_until(self, marker: bytes) -> bytes:
        while marker not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("websocket: connection closed during the handshake")
            self.buf += chunk
        head, _, self.buf = self.buf.partition(marker)
        return head

    def _read(self, n: int) -> bytes:
        while len(self.buf) < n:
            chunk = self.sock.recv(max(65536, n - len(self.buf)))
            if not chunk:
                raise ConnectionError("websocket: connection closed mid-frame")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def _send(self, opcode: int, payload: bytes) -> None:
        # Client frames are masked (RFC 6455 5.3).
        mask = os.urandom(4)
        n = len(payload)
        if n < 126:
            head = struct.pack("!BB", 0x80 | opcode, 0x80 | n)
        elif n < 1 << 16:
            head = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, n)
        else:
            head = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, n)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(head + mask + masked)

    def messages(self) -> Iterator[str]:
        """Text messages until the server closes."""
        parts = []
        try:
            while True:
                b0, b1 = self._read(2)
                fin, opcode = b0 & 0x80, b0 & 0x0F
                n = b1 & 0x7F
                if n == 126:
                    (n,) = struct.unpack("!H", self._read(2))
                elif n == 127:
                    (n,) = struct.unpack("!Q", self._read(8))
                mask = self._read(4) if b1 & 0x80 else None
                payload = self._read(n)
                if mask:
                    payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
                if opcode == 0x8:  # close: answer it and stop
                    try:
                        self._send(0x8, payload[:2])
                    except OSError:
                        pass
                    code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else 1005
                    if code not in (1000, 1005):
                        raise ConnectionError(f"websocket closed with code {code}: {payload[2:].decode(errors='replace')}")
                    return
                if opcode == 0x9:
                    self._send(0xA, payload)
                    continue
                if opcode in (0x1, 0x2, 0x0):
                    parts.append(payload)
                    if fin:
                        yield b"".join(parts).decode()
                        parts = []
        finally:
            self.sock.close()


def json_messages(url: str, token: str, timeout: float) -> Iterator[Dict[str, Any]]:
    """JSON messages of a WebSocket stream, e.g. an episode's events."""
    conn = _Conn(url, token, timeout)
    for m in conn.messages():
        yield json.loads(m)
