#!/usr/bin/env python3
"""Self-test of the CDP driver (cdp.py), Python 3 standard library only.

    python3 Tests/browser/selftest.py [OUTDIR]     # OUTDIR keeps the screenshots

1. The WebSocket client against a small in-process RFC 6455 server: handshake (and a refused
   wrong Sec-WebSocket-Accept), 7-bit/16-bit/64-bit lengths both ways, fragmented messages with
   a ping in the middle (answered by a pong), binary messages, a multi-megabyte message, a
   receive timeout, the close handshake.
2. Every driver function against fixture pages (Tests/browser/fixtures/) served by an
   http.server on 127.0.0.1, port 0, in a thread (with a POST /submit answering 303, a 404
   page, a cookie).

Prints one line per check (``ok - name`` / ``FAIL - name: why``) and, last, ``N passed, M
failed``; exits 0 only when nothing failed.
"""

from __future__ import annotations

import base64
import hashlib
import html
import http.server
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
import traceback
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # keep Tests/browser free of __pycache__

import cdp  # noqa: E402
from cdp import Browser, JSError, NavigationError, WaitTimeout, WebSocket, WebSocketClosed, WebSocketError  # noqa: E402

FIXTURES = os.path.join(HERE, "fixtures")


class Results:
    def __init__(self):
        self.passed = 0
        self.failed = 0

    def check(self, name, fn):
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - a check fails on anything
            self.failed += 1
            why = f"{type(e).__name__}: {e}".replace("\n", " | ")
            print(f"FAIL - {name}: {why}", flush=True)
            if os.environ.get("SELFTEST_TRACE"):
                traceback.print_exc()
        else:
            self.passed += 1
            print(f"ok - {name}", flush=True)


def expect(cond, why):
    if not cond:
        raise AssertionError(why)


def expect_raises(exc_type, fn, *needles):
    try:
        fn()
    except exc_type as e:
        text = str(e)
        for needle in needles:
            expect(needle in text, f"{exc_type.__name__} message {text!r} lacks {needle!r}")
        return e
    raise AssertionError(f"{exc_type.__name__} was not raised")


# --------------------------------------------------------------------------------------------
# A tiny WebSocket server (one connection per script) to test the client's framing


def _server_frame(opcode, payload, fin=True, length_form=None):
    """An unmasked server frame; ``length_form`` forces 7/16/64-bit length encoding."""
    n = len(payload)
    head = bytearray([(0x80 if fin else 0) | opcode])
    form = length_form or (7 if n < 126 else 16 if n < 65536 else 64)
    if form == 7:
        head.append(n)
    elif form == 16:
        head.append(126)
        head += n.to_bytes(2, "big")
    else:
        head.append(127)
        head += n.to_bytes(8, "big")
    return bytes(head) + payload


class _ServerConn:
    def __init__(self, sock):
        self.sock = sock
        self.buf = bytearray()

    def read_exact(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise EOFError("client closed")
            self.buf += chunk
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def read_frame(self):
        b0, b1 = self.read_exact(2)
        n = b1 & 0x7F
        form = 7
        if n == 126:
            n, form = int.from_bytes(self.read_exact(2), "big"), 16
        elif n == 127:
            n, form = int.from_bytes(self.read_exact(8), "big"), 64
        if not b1 & 0x80:
            raise ValueError("client frame not masked")
        key = self.read_exact(4)
        data = self.read_exact(n)
        payload = bytes(b ^ key[i % 4] for i, b in enumerate(data)) if n < 4096 else cdp._mask(data, key)
        return bool(b0 & 0x80), b0 & 0x0F, payload, form


class WSTestServer:
    """Runs ``script(conn)`` for each accepted connection; records failures."""

    def __init__(self, script, wrong_accept=False):
        self.script = script
        self.wrong_accept = wrong_accept
        self.errors = []
        self.log = []
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(1)
        self.port = self.listener.getsockname()[1]
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        try:
            sock, _ = self.listener.accept()
            sock.settimeout(10)
            conn = _ServerConn(sock)
            while b"\r\n\r\n" not in conn.buf:
                conn.buf += sock.recv(4096)
            head, _, rest = bytes(conn.buf).partition(b"\r\n\r\n")
            conn.buf = bytearray(rest)
            headers = {}
            for line in head.decode().split("\r\n")[1:]:
                k, _, v = line.partition(":")
                headers[k.strip().lower()] = v.strip()
            key = headers["sec-websocket-key"]
            expect(len(base64.b64decode(key)) == 16, "Sec-WebSocket-Key is not 16 bytes")
            expect(headers.get("sec-websocket-version") == "13", "no Sec-WebSocket-Version: 13")
            expect(headers.get("upgrade", "").lower() == "websocket", "no Upgrade: websocket")
            accept = base64.b64encode(hashlib.sha1((key + cdp._WS_GUID).encode()).digest()).decode()
            if self.wrong_accept:
                accept = base64.b64encode(b"x" * 20).decode()
            sock.sendall(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                          f"Connection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n").encode())
            if not self.wrong_accept:
                self.script(conn, self)
            sock.close()
        except Exception as e:  # noqa: BLE001
            self.errors.append(f"{type(e).__name__}: {e}")
        finally:
            self.listener.close()

    def join(self):
        self.thread.join(timeout=15)
        expect(not self.thread.is_alive(), "test server still running")
        expect(not self.errors, "server side: " + "; ".join(self.errors))


def ws_script(conn, server):
    sock = conn.sock
    # 1. a text message in three fragments with a ping between the first two
    sock.sendall(_server_frame(0x1, b"hello ", fin=False))
    sock.sendall(_server_frame(0x9, b"are you there"))
    sock.sendall(_server_frame(0x0, b"frag", fin=False) + _server_frame(0x0, b"mented", fin=True))
    fin, op, payload, _ = conn.read_frame()
    expect(fin and op == 0xA and payload == b"are you there", f"expected the pong, got op {op} {payload[:20]!r}")
    server.log.append("pong")
    # 2. echo three client messages (7-bit, 16-bit, 64-bit lengths), answering with the same form
    for expected_form in (7, 16, 64):
        fin, op, payload, form = conn.read_frame()
        expect(fin and op == 0x1, f"expected a final text frame, got op {op}")
        expect(form == expected_form, f"client used {form}-bit length, expected {expected_form}")
        sock.sendall(_server_frame(0x1, b"echo:" + payload, length_form=form))
        server.log.append(f"echo{form}")
    # 3. a binary message, then a large text message in 1 MiB fragments
    sock.sendall(_server_frame(0x2, bytes(range(256))))
    big = (b"0123456789abcdef" * (3 * 65536))  # 3 MiB
    chunk = 1 << 20
    for i in range(0, len(big), chunk):
        sock.sendall(_server_frame(0x1 if i == 0 else 0x0, big[i:i + chunk], fin=i + chunk >= len(big)))
    # 4. wait for the client's "done", then close with 1001 and expect the client's close frame
    fin, op, payload, _ = conn.read_frame()
    expect(payload == b"done", f"expected 'done', got {payload[:20]!r}")
    time.sleep(0.4)  # the client tests a receive timeout meanwhile
    sock.sendall(_server_frame(0x8, (1001).to_bytes(2, "big") + b"bye"))
    fin, op, payload, _ = conn.read_frame()
    expect(op == 0x8 and payload[:2] == (1001).to_bytes(2, "big"), f"expected the close echo, got op {op} {payload!r}")
    server.log.append("closed")


def websocket_checks(r: Results):
    server = WSTestServer(ws_script)
    state = {}

    def connect():
        state["ws"] = WebSocket(f"ws://127.0.0.1:{server.port}/echo", timeout=5)
    r.check("websocket: handshake with a checked Sec-WebSocket-Accept", connect)
    ws = state.get("ws")
    if ws is None:
        return

    def fragmented():
        msg = ws.recv(timeout=5)
        expect(msg == "hello fragmented", f"got {msg!r}")
        expect(ws.pings_answered == 1, f"pings answered: {ws.pings_answered}")
    r.check("websocket: fragmented message reassembled, ping in the middle answered with pong", fragmented)

    def lengths():
        for n in (100, 1000, 70000):
            text = ("x" * (n - 1)) + "é"  # a multi-byte character at the end
            ws.send(text)
            back = ws.recv(timeout=5)
            expect(back == "echo:" + text, f"echo of {n} characters differs (got {len(back)} characters)")
    r.check("websocket: masked frames with 7-bit, 16-bit and 64-bit lengths, echoed back", lengths)

    def binary_and_big():
        data = ws.recv(timeout=5)
        expect(data == bytes(range(256)), "binary message differs")
        big = ws.recv(timeout=10)
        expect(isinstance(big, str) and len(big) == 3 * 1024 * 1024 and big.startswith("0123"), "3 MiB message differs")
    r.check("websocket: binary message and a 3 MiB message in 1 MiB fragments", binary_and_big)

    def timeout_and_close():
        ws.send("done")
        expect_raises(WaitTimeout, lambda: ws.recv(timeout=0.15), "no WebSocket message")
        e = expect_raises(WebSocketClosed, lambda: ws.recv(timeout=5))
        expect(e.code == 1001 and e.reason == "bye", f"close code/reason {e.code} {e.reason!r}")
        server.join()
        expect(server.log == ["pong", "echo7", "echo16", "echo64", "closed"], f"server saw {server.log}")
        expect_raises(WebSocketClosed, lambda: ws.recv(timeout=1))
    r.check("websocket: receive timeout, close handshake (1001 'bye' echoed)", timeout_and_close)

    def wrong_accept():
        bad = WSTestServer(None, wrong_accept=True)
        expect_raises(WebSocketError, lambda: WebSocket(f"ws://127.0.0.1:{bad.port}/", timeout=5), "Sec-WebSocket-Accept")
        bad.join()
    r.check("websocket: a wrong Sec-WebSocket-Accept is refused", wrong_accept)


# --------------------------------------------------------------------------------------------
# The fixture HTTP server


class FixtureHandler(http.server.SimpleHTTPRequestHandler):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, directory=FIXTURES, **kwargs)

    def log_message(self, *args):  # quiet
        pass

    def _html(self, status, body, headers=()):
        data = body.encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        if url.path == "/missing":
            return self._html(404, "<!doctype html><title>Not found</title><h1 id='not-found'>Not found</h1>")
        if url.path == "/setcookie":
            self.send_response(303)
            self.send_header("Location", "/index.html")
            self.send_header("Set-Cookie", "fixture=yes; Path=/; HttpOnly; SameSite=Lax")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if url.path == "/result":
            fields = urllib.parse.parse_qsl(url.query, keep_blank_values=True)
            items = "".join(f"<dt>{html.escape(k)}</dt><dd id='f-{html.escape(k)}'>{html.escape(v)}</dd>"
                            for k, v in fields)
            return self._html(200, f"<!doctype html><title>Result</title><h1>Result</h1><dl id='result'>{items}</dl>")
        return super().do_GET()

    def do_POST(self):
        url = urllib.parse.urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode("utf-8")
        if url.path != "/submit":
            return self._html(404, "<h1 id='not-found'>no such form</h1>")
        fields = urllib.parse.parse_qsl(body, keep_blank_values=True)
        fields += [("query_" + k, v) for k, v in urllib.parse.parse_qsl(url.query)]
        self.send_response(303)
        self.send_header("Location", "/result?" + urllib.parse.urlencode(fields))
        self.send_header("Content-Length", "0")
        self.end_headers()


def start_fixture_server():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FixtureHandler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


# --------------------------------------------------------------------------------------------
# Driver checks


def driver_checks(r: Results, outdir: str):
    server = start_fixture_server()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    state = {}

    def start():
        b = Browser()
        b.start()
        state["browser"] = b
        expect(b.port and b.profile_dir and os.path.isdir(b.profile_dir), "no port or profile")
        expect("Chrome" in b.version().get("Browser", ""), "GET /json/version lacks Browser")
        state["page"] = b.new_page()
    r.check("browser: starts headless Chromium, port from DevToolsActivePort, page via Target.createTarget", start)
    browser, page = state.get("browser"), state.get("page")
    if page is None:
        if browser:
            browser.close()
        server.shutdown()
        return

    def goto():
        status = page.goto(base + "/index.html")
        expect(status == 200, f"status {status}")
        expect(page.network_status == 200, f"Network.responseReceived status {page.network_status}")
        expect(page.url == base + "/index.html", f"url {page.url}")
        expect(page.eval("document.readyState") == "complete", "not complete")
        expect(page.load_count >= 1, "no Page.loadEventFired seen")
    r.check("goto: loads the page, status 200, readyState complete", goto)

    def goto_same():
        page.eval("window.__same = 1")
        page.goto(base + "/index.html")
        expect(page.eval("window.__same") is None, "the same URL was not loaded again")
    r.check("goto: the same URL again loads a new document", goto_same)

    def status404():
        status = page.goto(base + "/missing")
        expect(status == 404, f"status_of_last_navigation {status}")
        expect(page.network_status == 404, f"network status {page.network_status}")
        expect(page.exists("#not-found"), "no #not-found")
    r.check("status_of_last_navigation: 404 page", status404)

    def nav_error():
        expect_raises(NavigationError, lambda: page.goto(f"http://127.0.0.1:{free_port()}/"), "ERR_CONNECTION_REFUSED")
    r.check("goto: a refused connection raises NavigationError", nav_error)

    def nav_error_click():
        page.goto(base + "/index.html")
        dead = f"http://127.0.0.1:{free_port()}/"
        page.eval(f"document.querySelector('#link').href = {cdp.js(dead)}")
        expect_raises(NavigationError, lambda: page.click("#link", navigate=True), "#link", "error page", "ERR_CONNECTION_REFUSED")
    r.check("click: a navigation that ends on Chromium's error page raises NavigationError", nav_error_click)

    def isolated():
        # the browser resolves no name but localhost and proxies non-loopback traffic to a
        # dead loopback port, so this never leaves the machine
        expect_raises(NavigationError, lambda: page.goto("http://example.invalid/"), "ERR_")
    r.check("isolation: a non-loopback host is unreachable from the browser", isolated)

    def evals():
        page.goto(base + "/index.html")
        expect(page.eval("1 + 2") == 3, "1+2")
        expect(page.eval("({a: [1, 'x', null]})") == {"a": [1, "x", None]}, "object by value")
        expect(page.eval("undefined") is None, "undefined")
        expect(page.eval("new Promise(r => setTimeout(() => r('later'), 150))") == "later", "promise")
        expect(page.eval("'z'.repeat(500000)") == "z" * 500000, "500 kB string back")
        big = "q" * 200000
        expect(page.eval(f"{cdp.js(big)}.length") == 200000, "200 kB expression sent")
        expect_raises(JSError, lambda: page.eval("throw new Error('boom')"), "boom")
        expect_raises(JSError, lambda: page.eval("Promise.reject(new TypeError('nope'))"), "nope")
        expect_raises(JSError, lambda: page.eval("no_such_variable"), "no_such_variable")
    r.check("eval: values, promises, big strings both ways, exceptions raise JSError", evals)

    def waits():
        page.goto(base + "/index.html")
        expect(page.text("#late") == "waiting", "late text already there")
        page.wait_for("document.querySelector('#late').textContent === 'arrived'", timeout=5)
        expect(page.wait_for("document.title") == "Driver fixture", "wait_for returns the value")
        expect(page.wait_for("document.body") is True, "wait_for with an element")
        e = expect_raises(WaitTimeout, lambda: page.wait_for("window.neverTrue === 1", timeout=0.5),
                          "window.neverTrue === 1", base + "/index.html")
        expect("0.5s" in str(e), str(e))
        expect_raises(WaitTimeout, lambda: page.wait_for("nope.x", timeout=0.3), "last error")
    r.check("wait_for: polls until true; timeout names the condition and URL", waits)

    def queries():
        expect(page.exists("#title") and not page.exists("#nope"), "exists")
        expect(page.text("h1") == "Driver fixture", "text")
        expect(page.text("#hidden") == "hidden text", "text of a hidden element")
        expect(page.texts("#items li") == ["alpha", "beta", "gamma delta"], f"texts {page.texts('#items li')}")
        expect(page.count("#items li") == 3, "count")
        expect(page.attr("#alt", "formaction") == "/submit?alt=1", "attr")
        expect(page.href("#rel") == base + "/page2.html?x=1", f"href {page.href('#rel')}")
        expect(page.value("input[name=csrf]") == "tok123", "value")
        sel = page.mark("#items li", "delta", exact=False)
        expect(page.text(sel) == "gamma delta", "mark (contains)")
        sel = page.mark("#items li", "beta")
        expect(page.eval(f"document.querySelector({cdp.js(sel)}).className") == "x", "mark (exact)")
        sel = page.mark("#items li", predicate="el.textContent.startsWith('al')")
        expect(page.text(sel) == "alpha", "mark (predicate)")
        expect_raises(WaitTimeout, lambda: page.text("#does-not-exist", timeout=0.3), "#does-not-exist", "index.html")
        expect_raises(WaitTimeout, lambda: page.mark("#items li", "omega", timeout=0.3), "omega")
        expect("<h1 id=\"title\">" in page.html(), "html")
    r.check("exists/text/texts/count/attr/href/value/mark/html; missing element names selector and URL", queries)

    def clicks():
        page.click("#counter")
        page.click("#counter")
        expect(page.text("#counter") == "clicked 2", page.text("#counter"))
        expect_raises(WaitTimeout, lambda: page.click("#no-button", timeout=0.3), "#no-button")
        page.click("#link", navigate=True)
        expect(page.url == base + "/page2.html" and page.text("h1") == "Second page", page.url)
        page.click("#back", navigate=True)
        expect(page.url == base + "/index.html", page.url)
    r.check("click: element.click(), and following a link with navigate=True", clicks)

    def fill():
        page.fill("#body", "line one\nline two")
        expect(page.value("#body") == "line one\nline two", "value not set")
        expect(page.text("#events") == "input=1 change=1 length=17", page.text("#events"))
        page.fill("#name", "Ann & <Bob>")
        expect(page.value("#name") == "Ann & <Bob>", "input value")
    r.check("fill: sets .value and dispatches input and change", fill)

    def typing():
        page.type("#body", "typed\ntext")
        expect(page.value("#body") == "typed\ntext", repr(page.value("#body")))
        events = page.text("#events")
        expect(events.startswith("input=") and int(events.split()[0].split("=")[1]) >= 3, events)
        page.fill("#body", "line one\nline two")
    r.check("type: Input.insertText and Enter produce real input events", typing)

    def submit_form():
        page.submit("form#f")
        expect(page.url.startswith(base + "/result?"), page.url)
        expect(page.status_of_last_navigation == 200, f"status {page.status_of_last_navigation}")
        expect(page.text("#f-name") == "Ann & <Bob>", page.text("#f-name"))
        body = page.eval("document.querySelector('#f-body').textContent")
        expect(body == "line one\nline two", repr(body))
        expect(page.text("#f-csrf") == "tok123", "hidden csrf field not sent")
        expect(not page.exists("#f-which"), "no submitter: no which field")
    r.check("submit: form.requestSubmit(), POST 303 -> 200, fields sent", submit_form)

    def submit_button():
        page.goto(base + "/index.html")
        page.fill("#name", "x")
        page.submit("#alt")
        expect(page.text("#f-which") == "alt", "submitter's name/value not sent")
        expect(page.text("#f-query_alt") == "1", "formaction not honoured")
        page.goto(base + "/index.html")
        page.submit("#go")
        expect(page.text("#f-which") == "go" and not page.exists("#f-query_alt"), "plain submit button")
    r.check("submit: a submit button (name/value and formaction honoured)", submit_button)

    def submit_get():
        page.goto(base + "/index.html")
        page.fill("#q", "a b&c")
        page.submit("form#g")
        expect(page.url == base + "/page2.html?q=a+b%26c", page.url)
        expect(page.text("#query") == "?q=a+b%26c", page.text("#query"))
    r.check("submit: a GET form", submit_get)

    def submit_invalid():
        page.goto(base + "/index.html")
        expect_raises(JSError, lambda: page.submit("form#req", navigate=True), "does not validate", "must")
        expect(page.url == base + "/index.html", page.url)
        expect_raises(WaitTimeout, lambda: page.submit("form#nope", timeout=0.3), "form#nope")
    r.check("submit: an invalid form or a missing one raises a clear error", submit_invalid)

    def reload():
        page.click("#counter")
        expect(page.text("#counter") == "clicked 1", page.text("#counter"))
        status = page.reload()
        expect(status == 200, f"status {status}")
        expect(page.text("#counter") == "clicked 0", "not reloaded")
    r.check("reload: a new document", reload)

    def dialogs():
        before = len(page.dialogs)
        expect(page.eval("alert('hi'); confirm('sure?') ? 'yes' : 'no'") == "yes", "confirm not accepted")
        expect(len(page.dialogs) == before + 2, f"dialogs {page.dialogs}")
    r.check("dialogs: alert and confirm are accepted, not blocking", dialogs)

    def screenshots():
        path = os.path.join(outdir, "fixture.png")
        page.screenshot(path)
        with open(path, "rb") as f:
            head = f.read(24)
        expect(head[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG")
        width, height = int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
        expect(width == 1280 and height >= 700, f"size {width}x{height}")
        page.goto(base + "/noise.html")
        page.wait_for("document.title === 'Noise ready'")
        path = os.path.join(outdir, "noise.png")
        page.screenshot(path)
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(24)
        height = int.from_bytes(head[20:24], "big")
        expect(size > 4_000_000, f"noise screenshot only {size} bytes")
        expect(height == 2600, f"full page height {height}")
        page.screenshot(os.path.join(outdir, "noise-viewport.png"), full_page=False)
        with open(os.path.join(outdir, "noise-viewport.png"), "rb") as f:
            head = f.read(24)
        viewport = page.eval("innerHeight")
        expect(int.from_bytes(head[20:24], "big") == viewport, f"viewport screenshot height, innerHeight {viewport}")
    r.check("screenshot: PNG, full page and viewport, a multi-megabyte one", screenshots)

    def cookies():
        page.goto(base + "/setcookie")
        expect(page.url == base + "/index.html", page.url)
        names = {c["name"]: c for c in page.cookies()}
        expect("fixture" in names and names["fixture"]["value"] == "yes", f"cookies {list(names)}")
        expect(names["fixture"]["httpOnly"], "HttpOnly flag")
        other = browser.new_page(new_context=True)
        other.goto(base + "/index.html")
        expect(other.cookies() == [], f"new context sees cookies {other.cookies()}")
        other.goto(base + "/setcookie")
        expect([c["name"] for c in other.cookies()] == ["fixture"], "no cookie in the new context")
        other.clear_cookies()
        expect(other.cookies() == [], "clear_cookies in the new context left cookies")
        expect(any(c["name"] == "fixture" for c in page.cookies()), "clearing another context's cookies cleared these")
        other.close()
        third = browser.new_page(via_http=True)
        third.goto(base + "/index.html")
        expect(any(c["name"] == "fixture" for c in third.cookies()), "default context page lacks the cookie")
        third.close()
        page.clear_cookies()
        expect(page.cookies() == [], "clear_cookies left cookies")
    r.check("cookies: Network.getCookies, separate browser contexts, PUT /json/new, clear_cookies", cookies)

    def stop():
        profile = browser.profile_dir
        proc = browser.proc
        browser.close()
        expect(proc.poll() is not None, "Chromium still running")
        expect(not os.path.exists(profile), "profile directory left behind")
    r.check("browser: closes Chromium and removes its profile", stop)
    server.shutdown()
    server.server_close()


def main():
    keep = len(sys.argv) > 1  # screenshots go to OUTDIR when given, else a removed temp dir
    outdir = sys.argv[1] if keep else tempfile.mkdtemp(prefix="cdp-selftest-")
    os.makedirs(outdir, exist_ok=True)
    r = Results()
    try:
        websocket_checks(r)
        driver_checks(r, outdir)
    finally:
        if not keep:
            shutil.rmtree(outdir, ignore_errors=True)
    print(f"{r.passed} passed, {r.failed} failed", flush=True)
    return 0 if r.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
