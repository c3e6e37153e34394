"""A small Chrome DevTools Protocol driver, Python 3 standard library only.

    from cdp import Browser
    with Browser() as browser:              # starts headless Chromium, removes its profile after
        page = browser.new_page()           # new_page(new_context=True): separate cookies
        page.goto("http://127.0.0.1:8000/")
        page.fill("form#f input[name=q]", "hello")
        page.submit("form#f")               # requestSubmit(), then waits for the new document
        print(page.status_of_last_navigation, page.text("h1"))
        page.screenshot("/tmp/shot.png")

Pieces, bottom up:

- ``WebSocket``: an RFC 6455 client over a plain socket (handshake with Sec-WebSocket-Key and
  a checked Sec-WebSocket-Accept, masked frames with 7-bit, 16-bit and 64-bit lengths,
  fragmented messages, ping -> pong, close handshake, timeouts, messages of any size).
- ``Connection``: one CDP connection (the browser endpoint); a reader thread matches answers to
  commands by id and hands events to the flat session (``sessionId``) they belong to.
- ``Browser``: starts and stops Chromium (fresh ``--user-data-dir`` in a temporary directory,
  port read from ``DevToolsActivePort``) and makes pages, optionally each in its own browser
  context (its own cookies).
- ``Page``: goto, reload, eval, wait_for, click, fill, type, submit, text, value, exists, href,
  mark, screenshot, status_of_last_navigation, cookies, clear_cookies.

Every wait has a timeout; a timeout raises ``WaitTimeout`` naming the selector or condition and
the page's current URL. JavaScript dialogs (alert, confirm, beforeunload) are accepted at once,
so they never block a test.
"""

from __future__ import annotations

import base64
import hashlib
import http.client
import itertools
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.parse

__all__ = [
    "Browser",
    "CDPError",
    "Connection",
    "JSError",
    "NavigationError",
    "Page",
    "WaitTimeout",
    "WebSocket",
    "WebSocketClosed",
    "WebSocketError",
]

DEFAULT_TIMEOUT = 10.0  # seconds, for element waits
NAVIGATION_TIMEOUT = 20.0  # seconds, for navigations
COMMAND_TIMEOUT = 30.0  # seconds, for one CDP command's answer


# --------------------------------------------------------------------------------------------
# Errors


class WaitTimeout(TimeoutError):
    """A wait ran out of time."""


class WebSocketError(Exception):
    """A WebSocket protocol error (bad handshake, bad frame)."""


class WebSocketClosed(WebSocketError):
    """The WebSocket connection is closed (close frame or end of stream)."""

    def __init__(self, message: str, code: int | None = None, reason: str = ""):
        super().__init__(message)
        self.code = code
        self.reason = reason


class CDPError(Exception):
    """A CDP command answered with an error."""

    def __init__(self, method: str, error: dict | str):
        if isinstance(error, dict):
            text = error.get("message", "")
            if error.get("data"):
                text += f" ({error['data']})"
            self.code = error.get("code")
        else:
            text = str(error)
            self.code = None
        super().__init__(f"{method}: {text}")
        self.method = method


class JSError(Exception):
    """The page threw while evaluating an expression."""


class NavigationError(Exception):
    """A navigation failed (network error, or no new document in time)."""


# --------------------------------------------------------------------------------------------
# WebSocket (RFC 6455), client side

_WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

OP_CONTINUATION = 0x0
OP_TEXT = 0x1
OP_BINARY = 0x2
OP_CLOSE = 0x8
OP_PING = 0x9
OP_PONG = 0xA


def _mask(data: bytes, key: bytes) -> bytes:
    """XOR data with the 4-byte masking key (fast for megabytes: one big-int XOR)."""
    n = len(data)
    if n == 0:
        return b""
    stream = (key * (n // 4 + 1))[:n]
    return (int.from_bytes(data, "little") ^ int.from_bytes(stream, "little")).to_bytes(n, "little")


def websocket_accept(key: str) -> str:
    """The Sec-WebSocket-Accept value a server must answer to Sec-WebSocket-Key ``key``."""
    return base64.b64encode(hashlib.sha1((key + _WS_GUID).encode("ascii")).digest()).decode("ascii")


class WebSocket:
    """A minimal RFC 6455 client.

    ``recv()`` returns one whole message (``str`` for text, ``bytes`` for binary), answering
    pings and reassembling fragments on the way; a close frame is answered and raises
    ``WebSocketClosed``. Sending is thread-safe; receive from one thread only.
    """

    def __init__(self, url: str, timeout: float = 10.0, max_message: int = 1 << 30):
        parts = urllib.parse.urlsplit(url)
        if parts.scheme != "ws":
            raise WebSocketError(f"only ws:// URLs are supported, not {url!r}")
        self.url = url
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        self.path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self.max_message = max_message
        self.closed = False
        self.close_code: int | None = None
        self.close_reason = ""
        self.pings_answered = 0
        self._close_sent = False
        self._send_lock = threading.Lock()
        self._buf = bytearray()
        self._sock = socket.create_connection((self.host, self.port), timeout=timeout)
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            self._handshake(timeout)
        except BaseException:
            self._sock.close()
            raise
        self._sock.settimeout(None)

    # -- handshake

    def _handshake(self, timeout: float) -> None:
        key = base64.b64encode(os.urandom(16)).decode("ascii")
        host = self.host if ":" not in self.host else f"[{self.host}]"
        request = (
            f"GET {self.path} HTTP/1.1\r\n"
            f"Host: {host}:{self.port}\r\n"
            "Upgrade: websocket\r\n"
            "Connection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\n"
            "Sec-WebSocket-Version: 13\r\n"
            "\r\n"
        )
        self._sock.sendall(request.encode("ascii"))
        deadline = time.monotonic() + timeout
        data = bytearray()
        while b"\r\n\r\n" not in data:
            if len(data) > 65536:
                raise WebSocketError("handshake answer headers too long")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise WaitTimeout(f"no WebSocket handshake answer from {self.url} in {timeout}s")
            self._sock.settimeout(remaining)
            try:
                chunk = self._sock.recv(4096)
            except socket.timeout:
                continue
            if not chunk:
                raise WebSocketClosed(f"connection closed during the handshake with {self.url}")
            data += chunk
        head, _, rest = bytes(data).partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = lines[0].split(" ", 2)
        if len(status) < 2 or status[1] != "101":
            raise WebSocketError(f"handshake with {self.url} refused: {lines[0]!r}")
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if headers.get("upgrade", "").lower() != "websocket":
            raise WebSocketError("handshake answer lacks 'Upgrade: websocket'")
        if "upgrade" not in [t.strip().lower() for t in headers.get("connection", "").split(",")]:
            raise WebSocketError("handshake answer lacks 'Connection: Upgrade'")
        if headers.get("sec-websocket-accept") != websocket_accept(key):
            raise WebSocketError("handshake answer has a wrong Sec-WebSocket-Accept")
        self._buf += rest

    # -- sending

    def send_frame(self, opcode: int, payload: bytes, fin: bool = True) -> None:
        """Sends one masked frame (lengths <126, 16-bit and 64-bit)."""
        n = len(payload)
        header = bytearray([(0x80 if fin else 0) | opcode])
        if n < 126:
            header.append(0x80 | n)
        elif n < 65536:
            header.append(0x80 | 126)
            header += n.to_bytes(2, "big")
        else:
            header.append(0x80 | 127)
            header += n.to_bytes(8, "big")
        key = os.urandom(4)
        header += key
        with self._send_lock:
            if self._close_sent and opcode != OP_CLOSE:
                raise WebSocketClosed("the WebSocket is closing", self.close_code, self.close_reason)
            self._sock.sendall(bytes(header) + _mask(payload, key))

    def send(self, message: str | bytes) -> None:
        """Sends a text (str) or binary (bytes) message in one frame."""
        if isinstance(message, str):
            self.send_frame(OP_TEXT, message.encode("utf-8"))
        else:
            self.send_frame(OP_BINARY, bytes(message))

    def ping(self, payload: bytes = b"") -> None:
        self.send_frame(OP_PING, payload)

    # -- receiving

    def _read_exact(self, n: int, deadline: float | None) -> bytes:
        out = bytearray(n)
        view = memoryview(out)
        got = 0
        if self._buf:
            take = min(n, len(self._buf))
            view[:take] = self._buf[:take]
            del self._buf[:take]
            got = take
        while got < n:
            if deadline is None:
                self._sock.settimeout(None)
            else:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise socket.timeout()
                self._sock.settimeout(remaining)
            k = self._sock.recv_into(view[got:], n - got)
            if k == 0:
                self.closed = True
                raise WebSocketClosed("connection closed by the peer (end of stream)")
            got += k
        return bytes(out)

    def _read_frame(self, deadline: float | None) -> tuple[bool, int, bytes]:
        b0, b1 = self._read_exact(2, deadline)
        fin = bool(b0 & 0x80)
        if b0 & 0x70:
            raise WebSocketError("frame with RSV bits set (no extension was negotiated)")
        opcode = b0 & 0x0F
        masked = bool(b1 & 0x80)
        n = b1 & 0x7F
        if n == 126:
            n = int.from_bytes(self._read_exact(2, deadline), "big")
        elif n == 127:
            n = int.from_bytes(self._read_exact(8, deadline), "big")
            if n >> 63:
                raise WebSocketError("frame length has its most significant bit set")
        if n > self.max_message:
            raise WebSocketError(f"frame of {n} bytes exceeds the limit of {self.max_message}")
        key = self._read_exact(4, deadline) if masked else None
        payload = self._read_exact(n, deadline) if n else b""
        if key:
            payload = _mask(payload, key)
        return fin, opcode, payload

    def recv(self, timeout: float | None = None) -> str | bytes:
        """Receives one whole message; raises WaitTimeout, or WebSocketClosed on close.

        A timeout that strikes in the middle of a frame leaves the stream unusable, so the
        connection is then closed.
        """
        if self.closed:
            raise WebSocketClosed("the WebSocket is closed", self.close_code, self.close_reason)
        deadline = None if timeout is None else time.monotonic() + timeout
        fragments: list[bytes] = []
        message_opcode: int | None = None
        size = 0
        started = False
        try:
            while True:
                fin, opcode, payload = self._read_frame(deadline)
                started = True
                if opcode == OP_PING:
                    if not fin or len(payload) > 125:
                        raise WebSocketError("bad ping frame")
                    try:
                        self.send_frame(OP_PONG, payload)
                        self.pings_answered += 1
                    except WebSocketClosed:
                        pass
                    continue
                if opcode == OP_PONG:
                    continue
                if opcode == OP_CLOSE:
                    code = int.from_bytes(payload[:2], "big") if len(payload) >= 2 else None
                    reason = payload[2:].decode("utf-8", "replace")
                    self.close_code, self.close_reason = code, reason
                    self._finish_close(code)
                    raise WebSocketClosed(f"WebSocket closed by the peer (code {code} {reason!r})".rstrip(), code, reason)
                if opcode in (OP_TEXT, OP_BINARY):
                    if message_opcode is not None:
                        raise WebSocketError("new data frame in the middle of a fragmented message")
                    message_opcode = opcode
                    fragments = [payload]
                elif opcode == OP_CONTINUATION:
                    if message_opcode is None:
                        raise WebSocketError("continuation frame without a message to continue")
                    fragments.append(payload)
                else:
                    raise WebSocketError(f"unknown opcode {opcode:#x}")
                size += len(payload)
                if size > self.max_message:
                    raise WebSocketError(f"message exceeds the limit of {self.max_message} bytes")
                if fin:
                    data = b"".join(fragments)
                    if message_opcode == OP_TEXT:
                        return data.decode("utf-8")
                    return data
        except socket.timeout:
            if started or message_opcode is not None:
                self._abort()
                raise WaitTimeout(f"WebSocket message from {self.url} incomplete after {timeout}s; connection closed") from None
            raise WaitTimeout(f"no WebSocket message from {self.url} within {timeout}s") from None
        except WebSocketError as e:
            if not isinstance(e, WebSocketClosed):
                self._abort()
            raise
        except OSError as e:
            self._abort()
            raise WebSocketClosed(f"WebSocket connection lost: {e}") from None

    def _finish_close(self, code: int | None) -> None:
        try:
            if not self._close_sent:
                self._close_sent = True
                self.send_frame(OP_CLOSE, (code or 1000).to_bytes(2, "big") if code else b"")
        except OSError:
            pass
        self._abort()

    def _abort(self) -> None:
        self.closed = True
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()

    def close(self, code: int = 1000, reason: str = "", timeout: float = 2.0) -> None:
        """Sends a close frame and waits (up to ``timeout``) for the peer's close frame."""
        if self.closed:
            return
        try:
            self.send_close(code, reason)
        except OSError:
            self._abort()
            return
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                self.recv(timeout=max(0.01, deadline - time.monotonic()))
        except (WebSocketError, WaitTimeout):
            pass
        self._abort()

    def send_close(self, code: int = 1000, reason: str = "") -> None:
        """Sends a close frame without waiting for the answer (another thread may be reading)."""
        if self._close_sent or self.closed:
            return
        self.send_frame(OP_CLOSE, code.to_bytes(2, "big") + reason.encode("utf-8")[:123])
        self._close_sent = True

    def shutdown(self) -> None:
        """Closes the socket at once (unblocks a thread waiting in recv)."""
        self._abort()


# --------------------------------------------------------------------------------------------
# CDP connection


class _Pending:
    __slots__ = ("event", "result", "error")

    def __init__(self):
        self.event = threading.Event()
        self.result = None
        self.error = None


class Connection:
    """One CDP WebSocket connection with a reader thread.

    ``send(method, params, session_id)`` waits for the answer. Events go to the handler
    registered for their ``sessionId`` (``None`` for browser-level events); handlers run on the
    reader thread and must not call ``send`` (``send_nowait`` is fine).
    """

    def __init__(self, ws_url: str, timeout: float = 10.0):
        self.ws = WebSocket(ws_url, timeout=timeout)
        self._ids = itertools.count(1)
        self._pending: dict[int, _Pending] = {}
        self._lock = threading.Lock()
        self._handlers: dict[str | None, object] = {}
        self.dead: BaseException | None = None
        self._thread = threading.Thread(target=self._read_loop, name="cdp-reader", daemon=True)
        self._thread.start()

    def on_events(self, session_id: str | None, handler) -> None:
        with self._lock:
            if handler is None:
                self._handlers.pop(session_id, None)
            else:
                self._handlers[session_id] = handler

    def _message(self, method: str, params: dict | None, session_id: str | None) -> tuple[int, str]:
        msg_id = next(self._ids)
        msg: dict = {"id": msg_id, "method": method, "params": params or {}}
        if session_id:
            msg["sessionId"] = session_id
        return msg_id, json.dumps(msg)

    def send(self, method: str, params: dict | None = None, session_id: str | None = None,
             timeout: float = COMMAND_TIMEOUT) -> dict:
        if self.dead is not None:
            raise CDPError(method, f"the connection to the browser is gone ({self.dead})")
        msg_id, text = self._message(method, params, session_id)
        pending = _Pending()
        with self._lock:
            self._pending[msg_id] = pending
        try:
            self.ws.send(text)
        except OSError as e:
            with self._lock:
                self._pending.pop(msg_id, None)
            raise CDPError(method, f"could not send: {e}") from None
        if not pending.event.wait(timeout):
            with self._lock:
                self._pending.pop(msg_id, None)
            raise WaitTimeout(f"no answer to {method} within {timeout}s")
        if pending.error is not None:
            raise CDPError(method, pending.error)
        return pending.result or {}

    def send_nowait(self, method: str, params: dict | None = None, session_id: str | None = None) -> None:
        """Sends a command without waiting for its answer (the answer is dropped)."""
        _, text = self._message(method, params, session_id)
        try:
            self.ws.send(text)
        except OSError:
            pass

    def _read_loop(self) -> None:
        try:
            while True:
                data = self.ws.recv()
                if isinstance(data, bytes):
                    data = data.decode("utf-8")
                msg = json.loads(data)
                if "id" in msg:
                    with self._lock:
                        pending = self._pending.pop(msg["id"], None)
                    if pending is not None:
                        pending.result = msg.get("result")
                        pending.error = msg.get("error")
                        pending.event.set()
                    continue
                with self._lock:
                    handler = self._handlers.get(msg.get("sessionId"))
                if handler is not None:
                    try:
                        handler(msg.get("method", ""), msg.get("params") or {})
                    except Exception:  # a broken handler must not stop the reader
                        pass
        except BaseException as e:  # connection closed or broken
            self.dead = e
            with self._lock:
                pending_list = list(self._pending.values())
                self._pending.clear()
            for pending in pending_list:
                pending.error = {"message": f"connection closed ({e})"}
                pending.event.set()

    def close(self) -> None:
        """Sends a close frame; the reader thread ends on the peer's answer (or at once)."""
        try:
            self.ws.send_close()
        except Exception:
            pass
        self._thread.join(timeout=2.0)
        self.ws.shutdown()
        self._thread.join(timeout=2.0)


# --------------------------------------------------------------------------------------------
# Browser


def _find_chromium() -> str:
    for candidate in (os.environ.get("CHROMIUM"), "/usr/bin/chromium", shutil.which("chromium"),
                      shutil.which("chromium-browser"), shutil.which("google-chrome")):
        if candidate and os.path.exists(candidate):
            return candidate
    raise FileNotFoundError("Chromium not found (set CHROMIUM to its path)")


class Browser:
    """Headless Chromium with a fresh profile, driven over CDP.

    ``isolate_network`` (default True) keeps the browser on the loopback interface: every host
    name other than localhost resolves to nothing and non-loopback traffic is sent to a dead
    proxy, and Chromium's background services are turned off.
    """

    def __init__(self, executable: str | None = None, window_size: tuple[int, int] = (1280, 900),
                 isolate_network: bool = True, extra_args: list[str] | tuple[str, ...] = (),
                 startup_timeout: float = 30.0):
        self.executable = executable or _find_chromium()
        self.window_size = window_size
        self.isolate_network = isolate_network
        self.extra_args = list(extra_args)
        self.startup_timeout = startup_timeout
        self.proc: subprocess.Popen | None = None
        self.profile_dir: str | None = None
        self.conn: Connection | None = None
        self.port: int | None = None
        self.pages: list[Page] = []
        self._contexts: list[str] = []

    def __enter__(self) -> "Browser":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def args(self) -> list[str]:
        w, h = self.window_size
        args = [
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--remote-debugging-port=0",
            f"--user-data-dir={self.profile_dir}",
            f"--window-size={w},{h}",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-extensions",
            "--disable-component-extensions-with-background-pages",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-default-apps",
            "--disable-domain-reliability",
            "--disable-client-side-phishing-detection",
            "--disable-breakpad",
            "--disable-crash-reporter",
            "--no-pings",
            "--metrics-recording-only",
            "--safebrowsing-disable-auto-update",
            "--password-store=basic",
            "--use-mock-keychain",
            "--mute-audio",
            "--hide-scrollbars",
            "--disable-features=Translate,OptimizationHints,MediaRouter,DialMediaRouteProvider,"
            "InterestFeedContentSuggestions,AutofillServerCommunication,CertificateTransparencyComponentUpdater",
        ]
        if self.isolate_network:
            args += [
                "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1",
                "--proxy-server=http://127.0.0.1:9",  # loopback bypasses the proxy implicitly
                "--dns-prefetch-disable",
            ]
        return args + self.extra_args + ["about:blank"]

    def start(self) -> None:
        self.profile_dir = tempfile.mkdtemp(prefix="cdp-profile-")
        log_path = os.path.join(self.profile_dir, "chromium.log")
        self._log = open(log_path, "wb")
        self.proc = subprocess.Popen(
            [self.executable] + self.args(), stdin=subprocess.DEVNULL, stdout=self._log,
            stderr=subprocess.STDOUT, start_new_session=True)
        port_file = os.path.join(self.profile_dir, "DevToolsActivePort")
        deadline = time.monotonic() + self.startup_timeout
        lines: list[str] = []
        while True:
            if self.proc.poll() is not None:
                self._fail_start(f"Chromium exited with status {self.proc.returncode} before it listened")
            try:
                with open(port_file) as f:
                    lines = f.read().splitlines()
            except FileNotFoundError:
                lines = []
            if len(lines) >= 2 and lines[0].strip().isdigit():
                break
            if time.monotonic() > deadline:
                self._fail_start(f"no {port_file} after {self.startup_timeout}s")
            time.sleep(0.05)
        self.port = int(lines[0].strip())
        self.ws_url = f"ws://127.0.0.1:{self.port}{lines[1].strip()}"
        self.conn = Connection(self.ws_url)

    def _fail_start(self, why: str) -> None:
        tail = ""
        try:
            self._log.flush()
            with open(os.path.join(self.profile_dir, "chromium.log"), "rb") as f:
                tail = f.read()[-2000:].decode("utf-8", "replace")
        except OSError:
            pass
        self.close()
        raise RuntimeError(f"{why}; Chromium's output ends with:\n{tail}")

    def version(self) -> dict:
        """``GET /json/version`` over HTTP."""
        return self._http_json("GET", "/json/version")

    def _http_json(self, method: str, path: str):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            conn.request(method, path)
            resp = conn.getresponse()
            body = resp.read()
            if resp.status != 200:
                raise RuntimeError(f"{method} {path}: HTTP {resp.status} {body[:200]!r}")
            return json.loads(body)
        finally:
            conn.close()

    def new_context(self) -> str:
        """A new browser context (an incognito-like profile with its own cookies)."""
        result = self.conn.send("Target.createBrowserContext", {"disposeOnDetach": True})
        self._contexts.append(result["browserContextId"])
        return result["browserContextId"]

    def new_page(self, new_context: bool = False, context_id: str | None = None,
                 via_http: bool = False) -> "Page":
        """Opens about:blank in a new page target and attaches to it.

        ``new_context=True`` puts the page in a fresh browser context; ``via_http=True``
        creates the target with ``PUT /json/new?about:blank`` instead of Target.createTarget
        (default context only).
        """
        if new_context:
            context_id = self.new_context()
        if via_http:
            if context_id:
                raise ValueError("via_http makes pages in the default context only")
            target_id = self._http_json("PUT", "/json/new?about:blank")["id"]
        else:
            params: dict = {"url": "about:blank"}
            if context_id:
                params["browserContextId"] = context_id
            target_id = self.conn.send("Target.createTarget", params)["targetId"]
        session_id = self.conn.send("Target.attachToTarget", {"targetId": target_id, "flatten": True})["sessionId"]
        page = Page(self, target_id, session_id, context_id)
        self.pages.append(page)
        return page

    def close(self) -> None:
        """Closes Chromium (Browser.close, then signals to what is left) and removes the profile."""
        if self.conn is not None:
            try:
                self.conn.send("Browser.close", timeout=5)
            except Exception:
                pass
            self.conn.close()
            self.conn = None
        if self.proc is not None:
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.terminate()
                try:
                    self.proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(timeout=5)
            # Chromium's helpers share the process group the browser led (we started it).
            pgid = self.proc.pid
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(pgid, 0)
                except OSError:
                    break
                try:
                    os.killpg(pgid, sig)
                except OSError:
                    break
                time.sleep(0.3)
            self.proc = None
        if getattr(self, "_log", None):
            self._log.close()
            self._log = None
        if self.profile_dir:
            for _ in range(10):
                shutil.rmtree(self.profile_dir, ignore_errors=True)
                if not os.path.exists(self.profile_dir):
                    break
                time.sleep(0.2)
            self.profile_dir = None


# --------------------------------------------------------------------------------------------
# Page

_TRANSIENT = ("Execution context was destroyed", "Cannot find context with specified id",
              "Inspected target navigated or closed", "Cannot find default execution context",
              "uniqueContextId not found", "No frame with given id", "not attached to an active page")


def js(value) -> str:
    """A JavaScript literal for a Python value (strings safely quoted)."""
    return json.dumps(value)


class Page:
    """One page target, attached through a flat session of the browser connection."""

    def __init__(self, browser: Browser, target_id: str, session_id: str, context_id: str | None):
        self.browser = browser
        self.conn = browser.conn
        self.target_id = target_id
        self.session_id = session_id
        self.context_id = context_id
        self.default_timeout = DEFAULT_TIMEOUT
        self.navigation_timeout = NAVIGATION_TIMEOUT
        self._state = threading.Lock()
        self.load_count = 0
        self.dialogs: list[dict] = []
        self.console: list[str] = []
        self._doc_status: dict[str, tuple[int, str]] = {}  # loaderId -> (status, url)
        self._last_doc: tuple[int, str, str] | None = None  # (status, url, loaderId)
        self._marks = itertools.count(1)
        self.conn.on_events(session_id, self._on_event)
        self.send("Page.enable")
        self.send("Network.enable")
        self.send("Runtime.enable")
        self.main_frame_id = self.send("Page.getFrameTree")["frameTree"]["frame"]["id"]

    # -- plumbing

    def send(self, method: str, params: dict | None = None, timeout: float = COMMAND_TIMEOUT) -> dict:
        return self.conn.send(method, params, self.session_id, timeout)

    def _on_event(self, method: str, params: dict) -> None:
        if method == "Page.loadEventFired":
            with self._state:
                self.load_count += 1
        elif method == "Network.responseReceived":
            if params.get("type") == "Document" and params.get("frameId") == self.main_frame_id:
                resp = params.get("response") or {}
                entry = (int(resp.get("status", 0)), resp.get("url", ""))
                with self._state:
                    self._doc_status[params.get("loaderId", "")] = entry
                    self._last_doc = (entry[0], entry[1], params.get("loaderId", ""))
        elif method == "Page.javascriptDialogOpening":
            with self._state:
                self.dialogs.append(params)
            # accept at once (alert, confirm, beforeunload); a prompt gets its default text
            self.conn.send_nowait("Page.handleJavaScriptDialog",
                                  {"accept": True, "promptText": params.get("defaultPrompt", "")},
                                  self.session_id)
        elif method == "Runtime.consoleAPICalled":
            args = params.get("args") or []
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in args)
            with self._state:
                self.console.append(f"{params.get('type')}: {text}")
                del self.console[:-200]
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails") or {}
            exc = details.get("exception") or {}
            with self._state:
                self.console.append(f"exception: {exc.get('description') or details.get('text')}")
                del self.console[:-200]

    @property
    def url(self) -> str:
        """The current document's URL."""
        try:
            return self.eval("location.href")
        except Exception:
            try:
                return self.send("Page.getNavigationHistory")["entries"][-1]["url"]
            except Exception:
                return "(unknown)"

    # -- JavaScript

    def eval(self, expression: str, timeout: float = COMMAND_TIMEOUT):
        """Evaluates an expression (awaiting a promise) and returns its value as JSON data.

        Raises JSError with the exception's text when the page throws.
        """
        result = self.send("Runtime.evaluate", {
            "expression": expression, "returnByValue": True, "awaitPromise": True,
            "userGesture": True, "allowUnsafeEvalBlockedByCSP": True,
        }, timeout=timeout)
        details = result.get("exceptionDetails")
        if details:
            exc = details.get("exception") or {}
            text = exc.get("description") or exc.get("value") or details.get("text") or "exception"
            raise JSError(f"{str(text).splitlines()[0] if text else text} (evaluating {_short(expression)})")
        value = result.get("result") or {}
        if "value" in value:
            return value["value"]
        if "unserializableValue" in value:
            raw = value["unserializableValue"]
            try:
                return float(raw) if not raw.endswith("n") else int(raw[:-1])
            except ValueError:
                return raw
        return None  # undefined (or a value that does not serialize)

    def _eval_quiet(self, expression: str):
        """eval that treats "the document went away" as None (for polling during navigations)."""
        try:
            return self.eval(expression, timeout=5)
        except CDPError as e:
            if any(t in str(e) for t in _TRANSIENT):
                return None
            raise
        except WaitTimeout:
            return None

    def wait_for(self, condition: str, timeout: float | None = None, interval: float = 0.1,
                 what: str | None = None):
        """Polls the JavaScript expression ``condition`` until it is truthy; returns its value
        (when JSON-serializable, else True). Raises WaitTimeout naming the condition and URL."""
        timeout = self.default_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        expr = (f"(() => {{ const v = ({condition}); if (!v) return null; "
                f"try {{ return (typeof v === 'object') ? true : v; }} catch (e) {{ return true; }} }})()")
        last_error = None
        while True:
            try:
                value = self._eval_quiet(expr)
                last_error = None
            except JSError as e:
                value, last_error = None, e
            if value:
                return value
            if time.monotonic() >= deadline:
                why = f" (last error: {last_error})" if last_error else ""
                raise WaitTimeout(f"timed out after {timeout}s waiting for {what or _short(condition, 160)} "
                                  f"at {self.url}{why}")
            time.sleep(interval)

    def wait_for_selector(self, selector: str, timeout: float | None = None, visible: bool = False) -> None:
        cond = f"document.querySelector({js(selector)})"
        if visible:
            cond = f"(e => e && !!(e.offsetWidth || e.offsetHeight || e.getClientRects().length) && getComputedStyle(e).visibility !== 'hidden')({cond})"
        self.wait_for(cond, timeout, what=f"{'visible ' if visible else ''}element {selector!r}")

    # -- navigation

    def _mark_document(self) -> str:
        token = f"nav-{time.monotonic_ns()}-{os.getpid()}"
        try:
            self.eval(f"document.__cdpNavToken = {js(token)}", timeout=5)
        except Exception:
            pass
        return token

    def _wait_new_document(self, token: str, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        cond = f"document.__cdpNavToken !== {js(token)} && document.readyState === 'complete'"
        while True:
            if self._eval_quiet(cond):
                href = self._eval_quiet("location.href") or ""
                if href.startswith("chrome-error://"):
                    text = self._eval_quiet("document.body ? document.body.innerText : ''") or ""
                    code = re.search(r"(?:net::)?ERR_[A-Z_]+", text)
                    raise NavigationError(f"{what}: the browser shows an error page "
                                          f"({code.group(0) if code else _short(text, 120)})")
                return
            if time.monotonic() >= deadline:
                state = self._eval_quiet("document.readyState")
                raise NavigationError(f"{what}: no new loaded document within {timeout}s "
                                      f"(still at {self.url}, readyState {state})")
            time.sleep(0.05)

    def goto(self, url: str, timeout: float | None = None) -> int | None:
        """Navigates and waits until the new document is loaded (readyState complete).

        Returns the main document's HTTP status (also in ``status_of_last_navigation``).
        """
        timeout = self.navigation_timeout if timeout is None else timeout
        token = self._mark_document()
        result = self.send("Page.navigate", {"url": url}, timeout=timeout)
        error = result.get("errorText")
        # an HTTP error status with an empty body still makes a document (Chromium's error page)
        if error and error != "net::ERR_HTTP_RESPONSE_CODE_FAILURE":
            raise NavigationError(f"navigation to {url} failed: {error}")
        if result.get("loaderId"):
            self._wait_new_document(token, timeout, f"goto {url}")
        else:  # same-document navigation (fragment)
            self.wait_for("document.readyState === 'complete'", timeout, what=f"goto {url} (same document)")
        return self.status_of_last_navigation

    def reload(self, timeout: float | None = None) -> int | None:
        """Reloads the page and waits for the new document."""
        timeout = self.navigation_timeout if timeout is None else timeout
        token = self._mark_document()
        self.send("Page.reload", {"ignoreCache": True})
        self._wait_new_document(token, timeout, "reload")
        return self.status_of_last_navigation

    def expect_navigation(self, action, timeout: float | None = None, what: str = "navigation"):
        """Runs ``action()`` (which should make the page navigate) and waits for the new document."""
        timeout = self.navigation_timeout if timeout is None else timeout
        token = self._mark_document()
        value = action()
        self._wait_new_document(token, timeout, what)
        return value

    @property
    def status_of_last_navigation(self) -> int | None:
        """HTTP status of the current main document (after redirects: the final answer)."""
        status = self._eval_quiet(
            "(() => { const e = performance.getEntriesByType('navigation')[0]; "
            "return e && e.responseStatus ? e.responseStatus : null; })()")
        if status:
            return int(status)
        with self._state:
            return self._last_doc[0] if self._last_doc else None

    @property
    def network_status(self) -> int | None:
        """Status of the last main-frame Document response seen by Network.responseReceived."""
        with self._state:
            return self._last_doc[0] if self._last_doc else None

    # -- elements

    def exists(self, selector: str) -> bool:
        """True when an element matches the selector now (no waiting)."""
        return bool(self.eval(f"!!document.querySelector({js(selector)})"))

    def count(self, selector: str) -> int:
        return int(self.eval(f"document.querySelectorAll({js(selector)}).length"))

    def _element_call(self, selector: str, body: str, timeout: float | None, what: str):
        """Waits for the selector, then runs ``body`` with ``el`` bound; returns its value."""
        self.wait_for_selector(selector, timeout)
        expr = f"(() => {{ const el = document.querySelector({js(selector)}); if (!el) return {{missing: true}}; return {{value: (() => {{ {body} }})()}}; }})()"
        try:
            result = self.eval(expr)
        except JSError as e:
            raise JSError(f"{what} {selector!r} at {self.url}: {e}") from None
        if not result or result.get("missing"):
            raise WaitTimeout(f"{what}: element {selector!r} disappeared at {self.url}")
        return result.get("value")

    def text(self, selector: str, timeout: float | None = None) -> str:
        """The element's rendered text (innerText; textContent for elements not rendered)."""
        return self._element_call(selector, "return el.innerText || el.textContent || '';", timeout, "text")

    def texts(self, selector: str) -> list[str]:
        """innerText of every element matching the selector (no waiting)."""
        return self.eval(f"Array.from(document.querySelectorAll({js(selector)}), e => e.innerText || e.textContent || '')")

    def value(self, selector: str, timeout: float | None = None) -> str:
        """The current ``value`` of an input, textarea or select."""
        return self._element_call(selector, "return el.value;", timeout, "value")

    def attr(self, selector: str, name: str, timeout: float | None = None):
        return self._element_call(selector, f"return el.getAttribute({js(name)});", timeout, "attr")

    def href(self, selector: str, timeout: float | None = None) -> str:
        """The link's resolved (absolute) href."""
        return self._element_call(selector, "return el.href;", timeout, "href")

    def html(self) -> str:
        return self.eval("document.documentElement.outerHTML")

    def mark(self, selector: str, text: str | None = None, exact: bool = True,
             predicate: str | None = None, timeout: float | None = None) -> str:
        """Finds the first element matching ``selector`` whose trimmed text equals (``exact``)
        or contains ``text`` and/or for which the JS ``predicate`` (with ``el``) is true, tags
        it, and returns a selector for exactly that element. Waits up to ``timeout``."""
        token = str(next(self._marks))
        conds = ["true"]
        if text is not None:
            t = "(el.innerText || el.textContent || '').trim()"
            conds.append(f"{t} === {js(text.strip())}" if exact else f"{t}.includes({js(text)})")
        if predicate:
            conds.append(f"({predicate})")
        expr = (f"(() => {{ for (const el of document.querySelectorAll({js(selector)})) {{ "
                f"if ({' && '.join(conds)}) {{ el.setAttribute('data-cdp-mark', {js(token)}); return true; }} }} "
                f"return false; }})()")
        desc = selector + (f" with text {'=' if exact else '~'} {text!r}" if text is not None else "") + \
            (f" where {predicate}" if predicate else "")
        self.wait_for(expr, timeout, what=f"element {desc}")
        return f'[data-cdp-mark="{token}"]'

    def click(self, selector: str, timeout: float | None = None, navigate: bool = False) -> None:
        """Waits for the element and calls ``element.click()``; with ``navigate=True`` also
        waits for the new document the click leads to."""
        action = lambda: self._element_call(selector, "el.click(); return true;", timeout, "click")
        if navigate:
            self.expect_navigation(action, what=f"click {selector!r}")
        else:
            action()

    def fill(self, selector: str, text: str, timeout: float | None = None) -> None:
        """Sets the element's ``value`` (through the native setter) and dispatches ``input``
        and ``change`` events."""
        body = (f"const proto = Object.getPrototypeOf(el); "
                f"const desc = Object.getOwnPropertyDescriptor(proto, 'value'); "
                f"if (el.focus) el.focus(); "
                f"if (desc && desc.set) desc.set.call(el, {js(text)}); else el.value = {js(text)}; "
                f"el.dispatchEvent(new InputEvent('input', {{bubbles: true, inputType: 'insertText'}})); "
                f"el.dispatchEvent(new Event('change', {{bubbles: true}})); return true;")
        self._element_call(selector, body, timeout, "fill")

    def type(self, selector: str, text: str, clear: bool = True, timeout: float | None = None) -> None:
        """Focuses the element and types ``text`` with Input.insertText (real input events,
        as a keyboard would make); ``clear`` selects the old value first so it is replaced."""
        body = "el.focus(); " + ("if (el.select) el.select(); " if clear else "") + "return true;"
        self._element_call(selector, body, timeout, "type")
        for line_no, line in enumerate(text.split("\n")):
            if line_no:
                self.send("Input.dispatchKeyEvent", {"type": "keyDown", "key": "Enter", "code": "Enter",
                                                     "windowsVirtualKeyCode": 13, "text": "\r"})
                self.send("Input.dispatchKeyEvent", {"type": "keyUp", "key": "Enter", "code": "Enter",
                                                     "windowsVirtualKeyCode": 13})
            if line:
                self.send("Input.insertText", {"text": line})

    def submit(self, selector: str, timeout: float | None = None, navigate: bool = True) -> None:
        """Submits a form: ``selector`` names the form (``form.requestSubmit()``) or one of its
        submit buttons (``form.requestSubmit(button)``: its name/value and ``formaction``
        count). Then waits for the navigation to complete."""
        body = ("const button = (el.tagName !== 'FORM') ? el : null; "
                "const form = button ? button.form : el; "
                "if (!form) throw new Error('no form for this element'); "
                "if (!form.checkValidity()) { "
                "  const bad = Array.from(form.elements).filter(e => e.willValidate && !e.checkValidity()).map(e => (e.name || e.id || e.tagName) + ': ' + e.validationMessage); "
                "  throw new Error('form does not validate: ' + bad.join('; ')); } "
                "if (button) form.requestSubmit(button); else form.requestSubmit(); return true;")
        action = lambda: self._element_call(selector, body, timeout, "submit")
        if navigate:
            self.expect_navigation(action, timeout, what=f"submit {selector!r}")
        else:
            action()

    # -- screenshots, cookies

    def screenshot(self, path: str, full_page: bool = True, max_height: int = 16000) -> str:
        """Saves a PNG of the page (the whole page when ``full_page``); returns the path."""
        params: dict = {"format": "png"}
        if full_page:
            metrics = self.send("Page.getLayoutMetrics")
            size = metrics.get("cssContentSize") or metrics.get("contentSize")
            view = metrics.get("cssLayoutViewport") or metrics.get("layoutViewport") or {}
            width = max(int(size["width"]), int(view.get("clientWidth", 0)), 1)
            height = min(max(int(size["height"]), int(view.get("clientHeight", 0)), 1), max_height)
            params.update({"captureBeyondViewport": True,
                           "clip": {"x": 0, "y": 0, "width": width, "height": height, "scale": 1}})
        data = self.send("Page.captureScreenshot", params, timeout=60)["data"]
        directory = os.path.dirname(os.path.abspath(path))
        os.makedirs(directory, exist_ok=True)
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))
        return path

    def cookies(self, urls: list[str] | None = None) -> list[dict]:
        """Network.getCookies: the cookies for the current URL (or for ``urls``)."""
        params = {"urls": urls} if urls else {}
        return self.send("Network.getCookies", params)["cookies"]

    def clear_cookies(self) -> None:
        """Network.clearBrowserCookies (this page's browser context)."""
        self.send("Network.clearBrowserCookies")

    def close(self) -> None:
        try:
            self.conn.send("Target.closeTarget", {"targetId": self.target_id}, timeout=5)
        except Exception:
            pass
        self.conn.on_events(self.session_id, None)
        if self.context_id:
            try:
                self.conn.send("Target.disposeBrowserContext", {"browserContextId": self.context_id}, timeout=5)
            except Exception:
                pass


def _short(text: str, limit: int = 120) -> str:
    text = re.sub(r"\s+", " ", text).strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."
