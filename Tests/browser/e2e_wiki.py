#!/usr/bin/env python3
"""End-to-end test of the wiki web UI (/_wiki/) in headless Chromium.

    WIKI_ADMIN=admin WIKI_ADMIN_PASSWORD=... \\
    WIKI_USER1=alice WIKI_USER1_PASSWORD=... \\
    WIKI_USER2=carol WIKI_USER2_PASSWORD=... \\
    python3 Tests/browser/e2e_wiki.py http://127.0.0.1:5984 /tmp/e2e-shots

Runs against a server that is already running at BASE. Prints one line per check
(``ok - name`` or ``FAIL - name: why``) and, last, ``N passed, M failed``; exits 0 only when
nothing failed. Screenshots go to OUTDIR (signin.png, wikis.png, page.png, edit.png,
history.png, blame.png, conflicts.png, asof.png, asof-page.png, asof-wiki.png, asof-error.png,
page-delete.png, page-deleted.png, history-deleted.png, recent-deleted.png, draft-page.png,
drafts.png, notfound.png; fail-NN.png and fail-NN.html for
each failed check; console.log with the pages' console output).

A check that needs something an earlier check failed to produce (the wiki's URL, say) fails
with "not run: needs ..." rather than being skipped, so the count never looks better than it is.
Set E2E_TIMEOUT (seconds, default 10) to change how long each element wait lasts.
"""

from __future__ import annotations

import base64
import json
import os
import re
import secrets
import shlex
import signal
import subprocess
import sys
import time
import traceback
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime, timezone

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # keep Tests/browser free of __pycache__

from cdp import Browser, js  # noqa: E402

quote = urllib.parse.quote
unquote = urllib.parse.unquote
urlsplit = urllib.parse.urlsplit

# urllib honours http_proxy and friends; the API calls go straight to BASE.
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))

# JavaScript helpers evaluated in the page -------------------------------------------------

JS_CSRF_AUDIT = r"""
Array.from(document.forms)
  .filter(f => (f.getAttribute('method') || 'get').toLowerCase() === 'post')
  .filter(f => { const c = f.querySelector('input[name=csrf]');
                 return !c || c.type !== 'hidden' || !c.value; })
  .map(f => f.id ? 'form#' + f.id
                 : 'form' + (f.className ? '.' + String(f.className).trim().split(/\s+/).join('.') : '')
                   + '[action=' + (f.getAttribute('action') || '') + ']')
"""

# The accessibility audit of a page of the app (one with its header.top): every control shown
# (input, textarea, select; not hidden ones) has a name (a <label>, for= or around it,
# aria-label or aria-labelledby), exactly one h1, every img an alt, <html> a lang, and the
# first focusable element is the "Skip to content" link to an element of the page.
# WCAG 2.1 AA 1.4.3 (contrast, minimum), as axe checks it: the text of every visible element
# against the background it is drawn on (the element's and its ancestors' background colours
# composited, over white), at least 4.5:1, or 3:1 for large text (24 px, or 18.66 px bold).
# Text over a background image is not judged (axe reports it for review too), nor the text of
# disabled controls (which 1.4.3 exempts).
JS_CONTRAST = r"""
(() => {
  const parse = c => { const m = c.match(/rgba?\(([^)]+)\)/); if (!m) return null;
    const p = m[1].split(/[ ,\/]+/).filter(Boolean).map(Number);
    return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1]; };
  const over = (top, bottom) => { const a = top[3];
    return [0, 1, 2].map(i => top[i] * a + bottom[i] * (1 - a)).concat([1]); };
  const lum = c => { const f = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]); };
  const background = el => { const layers = [];
    for (let e = el; e; e = e.parentElement) { const st = getComputedStyle(e);
      if (st.backgroundImage && st.backgroundImage !== 'none') return null;
      const c = parse(st.backgroundColor); if (c && c[3] > 0) layers.push(c); if (c && c[3] >= 1) break; }
    let bg = [255, 255, 255, 1]; for (const c of layers.reverse()) bg = over(c, bg); return bg; };
  const bad = [];
  for (const el of document.body.querySelectorAll('*')) {
    if (!Array.from(el.childNodes).some(n => n.nodeType === 3 && n.textContent.trim())) continue;
    if (el.closest('[disabled], [aria-hidden=true], .skip')) continue;
    const st = getComputedStyle(el);
    if (st.visibility !== 'visible' || !el.getClientRects().length || parseFloat(st.opacity) === 0) continue;
    const bg = background(el); const fg = parse(st.color); if (!bg || !fg) continue;
    const color = over(fg, bg); const [l1, l2] = [lum(color), lum(bg)].sort((a, b) => b - a);
    const ratio = (l1 + 0.05) / (l2 + 0.05);
    const size = parseFloat(st.fontSize), weight = parseInt(st.fontWeight, 10) || 400;
    const need = size >= 24 || (size >= 18.66 && weight >= 700) ? 3 : 4.5;
    if (ratio < need) bad.push('contrast ' + ratio.toFixed(2) + ':1 < ' + need + ' for ' +
      el.tagName.toLowerCase() + (el.className ? '.' + String(el.className).split(' ')[0] : '') +
      ' "' + el.textContent.trim().slice(0, 30) + '"');
  }
  return bad;
})
"""

JS_A11Y_AUDIT = r"""
(() => {
  if (!document.querySelector('header.top')) { return []; }
  const bad = [];
  const what = el => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') +
    (el.name ? '[name=' + el.name + ']' : '') + (el.type && el.tagName === 'INPUT' ? '[type=' + el.type + ']' : '');
  const text = el => (el ? (el.textContent || '') : '').trim();
  for (const el of document.querySelectorAll('input, textarea, select')) {
    if (el.type === 'hidden') { continue; }
    const named = (el.getAttribute('aria-label') || '').trim() ||
      (el.getAttribute('aria-labelledby') || '').split(/\s+/).filter(Boolean)
        .map(id => text(document.getElementById(id))).join(' ').trim() ||
      Array.from(el.labels || []).map(text).join(' ').trim();
    if (!named) { bad.push('no accessible name: ' + what(el)); }
  }
  const h1 = document.querySelectorAll('h1').length;
  if (h1 !== 1) { bad.push(h1 + ' h1 elements'); }
  for (const img of document.querySelectorAll('img')) {
    if (!img.hasAttribute('alt')) { bad.push('img without alt: ' + img.getAttribute('src')); }
  }
  if (!(document.documentElement.getAttribute('lang') || '').trim()) { bad.push('html without lang'); }
  const first = document.querySelector('a[href], button, input:not([type=hidden]), select, textarea, ' +
                                       '[tabindex]:not([tabindex="-1"])');
  const target = first && first.classList.contains('skip') && document.querySelector(first.getAttribute('href'));
  if (!target) { bad.push('the first focusable element is not a skip link to the content: ' + (first ? first.outerHTML.slice(0, 60) : 'none')); }
  return bad.concat((CONTRAST_FN)());
})()
"""
JS_A11Y_AUDIT = JS_A11Y_AUDIT.replace("CONTRAST_FN", JS_CONTRAST.strip())


JS_HISTORY = r"""
Array.from(document.querySelectorAll('ol#history > li.revision')).map(li => {
  const q = s => li.querySelector(s);
  const t = s => q(s) ? (q(s).innerText || q(s).textContent || '').trim() : null;
  return {rev: t('.rev'), author: t('.author'), time: t('.time'), origin: t('.origin'),
          diff: q('pre.diff') ? q('pre.diff').textContent : null,
          view: q('a.view') ? q('a.view').href : null};
})
"""

JS_BLAME = r"""
Array.from(document.querySelectorAll('table#blame tbody tr')).map(tr => {
  const t = s => tr.querySelector(s) ? tr.querySelector(s).textContent : null;
  return {rev: t('td.rev'), author: t('td.author'), time: t('td.time'), text: t('td.text')};
})
"""

# Provokes what a hostile page could hang on events, then reports what a sanitizer must remove.
JS_XSS_PROBE = r"""
((root) => {
  const scope = document.querySelector(root);
  if (scope) for (const el of scope.querySelectorAll('*')) {
    for (const type of ['mouseover', 'mouseenter', 'mousemove', 'focus', 'pointerover']) {
      try { el.dispatchEvent(new MouseEvent(type, {bubbles: true})); } catch (e) {}
    }
  }
  const onAttrs = [];
  for (const el of document.querySelectorAll('*'))
    for (const a of el.attributes)
      if (/^on/i.test(a.name)) onAttrs.push(el.tagName.toLowerCase() + '[' + a.name + ']');
  const jsLinks = Array.from(document.querySelectorAll('a[href], area[href]')).filter(a => {
    const raw = (a.getAttribute('href') || '').replace(/[\u0000-\u0020]/g, '').toLowerCase();
    return raw.startsWith('javascript:') || a.protocol === 'javascript:';
  }).map(a => a.outerHTML.slice(0, 100));
  const scripts = scope ? scope.querySelectorAll('script').length : -1;
  return {xss: (typeof window.__xss === 'undefined') ? null : String(window.__xss),
          onAttrs, jsLinks, scripts, scope: !!scope};
})
"""


class CheckFailed(AssertionError):
    pass


def expect(cond, why):
    if not cond:
        raise CheckFailed(why)


def norm(text) -> str:
    """Newlines normalized, trailing spaces and the final newline dropped."""
    text = (text or "").replace("\r\n", "\n").replace("\r", "\n")
    return "\n".join(line.rstrip() for line in text.split("\n")).strip("\n")


def word_re(word: str):
    return re.compile(r"(?<![\w.-])" + re.escape(word) + r"(?![\w-])", re.IGNORECASE)


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40]


class Scenario:
    def __init__(self, base: str, outdir: str, creds: dict):
        self.base = base.rstrip("/")
        self.outdir = outdir
        self.creds = creds
        self.passed = 0
        self.failed = 0
        self.n = 0
        self.state: dict = {}
        self.csrf_violations: list[str] = []
        self.a11y_violations: list[str] = []
        self.a11y_pages = 0
        self.page = None
        self.rand = secrets.token_hex(4)
        self.title = f"Browser Test {self.rand}"

    # -- reporting

    def check(self, name: str, needs: tuple = ()):
        """Decorator: runs the check at once and reports it."""
        def run(fn):
            self.n += 1
            missing = [k for k in needs if self.state.get(k) is None]
            if missing:
                self._fail(name, f"not run: needs {', '.join(missing)} (an earlier check failed)", dump=False)
                return fn
            try:
                fn()
            except Exception as e:  # noqa: BLE001 - any error fails the check
                why = f"{type(e).__name__}: {e}" if not isinstance(e, CheckFailed) else str(e)
                if os.environ.get("E2E_TRACE"):
                    traceback.print_exc()
                self._fail(name, why)
            else:
                self.passed += 1
                print(f"ok - {name}", flush=True)
            return fn
        return run

    def _fail(self, name: str, why: str, dump: bool = True) -> None:
        self.failed += 1
        why = re.sub(r"\s+", " ", why).strip()
        if dump and self.page is not None:
            stem = os.path.join(self.outdir, f"fail-{self.n:02d}")
            try:
                self.page.screenshot(stem + ".png")
                with open(stem + ".html", "w", encoding="utf-8") as f:
                    f.write(f"<!-- {self.page.url} -->\n" + (self.page.html() or ""))
                why += f" (see fail-{self.n:02d}.png/.html)"
            except Exception:  # noqa: BLE001
                pass
        print(f"FAIL - {name}: {why}", flush=True)

    # -- helpers: URLs, API, browser

    def ui(self, rest: str = "") -> str:
        return f"{self.base}/_wiki/{rest}"

    def api(self, method: str, path: str, who: str, body=None, timeout: float = 60):
        user, password = self.creds[who]
        data = json.dumps(body).encode("utf-8") if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method)
        token = base64.b64encode(f"{user}:{password}".encode("utf-8")).decode("ascii")
        req.add_header("Authorization", "Basic " + token)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with OPENER.open(req, timeout=timeout) as resp:
                raw, status = resp.read(), resp.status
        except urllib.error.HTTPError as e:
            raw, status = e.read(), e.code
        try:
            return status, json.loads(raw) if raw else None
        except ValueError:
            return status, raw.decode("utf-8", "replace")

    def doc_path(self, page_name: str) -> str:
        return "/wiki/" + quote(f"{self.state['wiki_id']}:{page_name}", safe="")

    def shot(self, name: str) -> None:
        self.page.screenshot(os.path.join(self.outdir, name))

    def audit(self) -> None:
        """Records POST forms of the current page that lack a hidden, non-empty csrf input."""
        try:
            bad = self.page.eval(JS_CSRF_AUDIT) or []
        except Exception:  # noqa: BLE001
            return
        if bad:
            where = urlsplit(self.page.url)
            entry = f"{where.path}{'?' + where.query if where.query else ''}: {', '.join(bad)}"
            if entry not in self.csrf_violations:
                self.csrf_violations.append(entry)
        self.a11y_audit()

    def narrow(self, width: int = 390, height: int = 844) -> None:
        """A phone's viewport (until wide())."""
        self.page.send("Emulation.setDeviceMetricsOverride",
                       {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})

    def wide(self) -> None:
        """The window's own viewport again (once the page has it: a screenshot right after
        would otherwise be cut to the phone's width)."""
        self.page.send("Emulation.clearDeviceMetricsOverride")
        self.page.wait_for("window.innerWidth > 390", timeout=5, what="the window's width back")

    def a11y_audit(self) -> None:
        """Records the accessibility audit's findings on the current page, and whether it
        scrolls sideways in a 390 px wide viewport."""
        try:
            bad = self.page.eval(JS_A11Y_AUDIT)
            if bad is None or not self.page.eval("!!document.querySelector('header.top')"):
                return
            self.narrow()
            try:
                width = self.page.eval("document.documentElement.scrollWidth")
            finally:
                self.wide()
        except Exception:  # noqa: BLE001
            return
        self.a11y_pages += 1
        if width > 390:
            bad = bad + [f"{width} px wide at 390 px"]
        if bad:
            where = urlsplit(self.page.url)
            entry = f"{where.path}{'?' + where.query if where.query else ''}: {', '.join(bad)}"
            if entry not in self.a11y_violations:
                self.a11y_violations.append(entry)

    def go(self, url: str):
        status = self.page.goto(url)
        self.audit()
        return status

    def follow(self, selector: str) -> None:
        """Clicks a link (or button) and waits for the new document."""
        self.page.click(selector, navigate=True)
        self.audit()

    def send(self, selector: str) -> None:
        """Submits a form (or with a submit button) and waits for the new document."""
        self.page.submit(selector)
        self.audit()

    def where(self) -> str:
        """The current URL and the start of the page's text, for failure messages."""
        try:
            text = self.page.eval("document.body ? document.body.innerText : ''") or ""
        except Exception:  # noqa: BLE001
            text = ""
        text = re.sub(r"\s+", " ", text).strip()[:160]
        return f"at {self.page.url} [{self.page.status_of_last_navigation}] page says: {text!r}"

    def path(self) -> str:
        return unquote(urlsplit(self.page.url).path)

    def query(self) -> dict:
        return urllib.parse.parse_qs(urlsplit(self.page.url).query, keep_blank_values=True)

    def expect_page_view(self, page_name: str) -> None:
        """The page view of page_name: its path, no action, article#content."""
        expect(self.path() == unquote(urlsplit(self.state["wiki_url"]).path) + page_name,
               f"expected the page view of {page_name!r}, {self.where()}")
        expect("action" not in self.query() and "rev" not in self.query(),
               f"expected the plain page view of {page_name!r}, {self.where()}")
        self.page.wait_for_selector("article#content")

    def expect_editor(self, page_name: str) -> None:
        expect(self.path() == unquote(urlsplit(self.state["wiki_url"]).path) + page_name,
               f"expected the edit view of {page_name!r}, {self.where()}")
        self.page.wait_for_selector("form#editor textarea[name=markdown]")

    def content_text(self) -> str:
        return self.page.text("article#content")

    def expect_not_found(self, what: str) -> None:
        status = self.page.status_of_last_navigation
        expect(status == 404, f"{what}: status {status}, expected 404, {self.where()}")
        expect(self.page.exists("#not-found"), f"{what}: no #not-found, {self.where()}")
        self.expect_title_absent(what)

    def expect_title_absent(self, what: str) -> None:
        html = self.page.html() or ""
        expect(self.title.lower() not in html.lower(),
               f"{what}: the wiki's title {self.title!r} appears in the page ({self.page.url})")

    def sign_in(self, who: str, shot_before: str | None = None, shot_after: str | None = None) -> None:
        user, password = self.creds[who]
        page = self.page
        # reuse the sign-in page we were sent to only when it leads back to /_wiki/
        nxt = unquote(self.query().get("next", [""])[0])
        if self.path() != "/_wiki/_signin" or nxt not in ("", "/_wiki/", "/_wiki") or not page.exists("form#signin"):
            self.go(self.ui("_signin"))
        page.wait_for_selector("form#signin")
        page.fill("form#signin input[name=name]", user)
        page.fill("form#signin input[name=password]", password)
        if shot_before:
            self.shot(shot_before)
        self.send("form#signin")
        expect(self.path() == "/_wiki/", f"after signing {user} in, expected /_wiki/, {self.where()}")
        shown = page.text("#user")
        expect(word_re(user).search(shown), f"#user shows {shown!r}, not {user!r}")
        expect(page.exists("form#signout"), "no form#signout on /_wiki/")
        if shot_after:
            self.shot(shot_after)

    def sign_out(self) -> None:
        if not self.page.exists("form#signout"):
            self.go(self.ui())
        self.send("form#signout")

    def new_page(self, name: str) -> None:
        """On the wiki: form#new-page with the title; lands on the edit view."""
        self.go(self.state["wiki_url"])
        self.page.fill("form#new-page input[name=title]", name)
        self.send("form#new-page")
        self.expect_editor(name)

    def publish(self) -> None:
        self.send("button#publish")

    def wait_status(self, pattern: str, timeout: float) -> str:
        """Waits until #draft-status matches the regular expression (case-insensitive)."""
        self.page.wait_for(
            f"(() => {{ const e = document.querySelector('#draft-status'); if (!e) return false; "
            f"const t = e.textContent; return new RegExp({js(pattern)}, 'i').test(t) && "
            f"!/unsaved|not saved|failed|error/i.test(t); }})()",
            timeout, what=f"#draft-status matching /{pattern}/i")
        return self.page.text("#draft-status")

    # -- the scenario

    def run(self) -> None:
        st = self.state
        page = self.page
        admin, alice, carol = (self.creds[k][0] for k in ("admin", "alice", "carol"))

        home_v1 = "# Home\nSee [[Second Page]]."
        second_text = "# Second Page\nThis is the second page."
        home_v2 = "# Home\nSee [[Second Page]].\nA second line, added later."

        # 1. alice signs in -----------------------------------------------------------------

        @self.check("not signed in, /_wiki/ redirects to /_wiki/_signin?next=...")
        def _():
            self.go(self.ui())
            expect(self.path() == "/_wiki/_signin", f"expected the sign-in page, {self.where()}")
            expect("next" in self.query(), f"no next parameter in {page.url}")
            page.wait_for_selector("form#signin")

        @self.check(f"alice ({alice}) signs in and lands on /_wiki/ with her name in #user")
        def _():
            self.sign_in("alice", shot_before="signin.png", shot_after="wikis.png")
            st["alice_in"] = True

        # 2. a wiki, its settings ------------------------------------------------------------

        @self.check("alice creates a wiki with form#create-wiki and lands on it", needs=("alice_in",))
        def _():
            self.go(self.ui())
            page.fill("form#create-wiki input[name=title]", self.title)
            self.send("form#create-wiki")
            url = urlsplit(page.url)
            m = re.fullmatch(r"/_wiki/([^/]+)/", url.path)
            expect(m and not m.group(1).startswith("_"), f"expected /_wiki/{{id}}/, {self.where()}")
            h1s = [t.strip() for t in page.texts("h1")]
            expect(self.title in h1s, f"no h1 {self.title!r} (h1s: {h1s})")
            st["wiki_id"] = unquote(m.group(1))
            st["wiki_url"] = f"{url.scheme}://{url.netloc}{url.path}"

        @self.check("the new wiki is listed in alice's /_wiki/ (a.wiki)", needs=("wiki_url",))
        def _():
            self.go(self.ui())
            link = page.mark("#wikis li a.wiki", self.title)
            href = page.href(link)
            expect(urlsplit(href).path == urlsplit(st["wiki_url"]).path, f"a.wiki href {href}")

        @self.check(f"alice sets the wiki's members to {admin} only (a#settings, form#settings)",
                    needs=("wiki_url",))
        def _():
            self.go(st["wiki_url"])
            self.follow("a#settings")
            expect(self.query().get("action") == ["settings"], f"a#settings led to {page.url}")
            title_value = page.value("form#settings input[name=title]")
            expect(title_value == self.title, f"settings title field holds {title_value!r}")
            page.fill("form#settings textarea[name=members]", admin)
            self.send("form#settings")
            expect(self.query().get("action") == ["settings"], f"after saving, {self.where()}")
            members = page.texts("#members li")
            expect(any(word_re(admin).search(m) for m in members), f"#members li lacks {admin}: {members}")
            expect(not any(word_re(carol).search(m) for m in members), f"#members li lists {carol}: {members}")
            kept = norm(page.value("form#settings textarea[name=members]"))
            expect(kept.split() == [admin], f"members field after saving holds {kept!r}")
            st["members_set"] = True

        # 3. Home: editor, autosaved draft, publish ------------------------------------------

        @self.check("alice starts page Home with form#new-page and gets its editor", needs=("wiki_url",))
        def _():
            self.new_page("Home")
            expect(self.query().get("action") == ["edit"], f"expected ?action=edit, {self.where()}")
            for sel in ("input[name=base]", "button#publish", "button#discard", "#preview", "#draft-status"):
                expect(page.exists(f"form#editor {sel}") or page.exists(sel), f"the editor lacks {sel}")
            url = urlsplit(page.url)
            st["home_edit_url"] = f"{url.scheme}://{url.netloc}{url.path}?{url.query}"

        @self.check("typing into the editor updates the #preview", needs=("home_edit_url",))
        def _():
            page.fill("form#editor textarea[name=markdown]", home_v1)
            # (Under the editor's own h1, the preview's headings are one level down.)
            page.wait_for("(() => { const h = document.querySelector('#preview h2'); "
                          "return h && h.textContent.trim() === 'Home'; })()", what="#preview h2 'Home'")
            page.wait_for("document.querySelector('#preview').textContent.includes('Second Page')",
                          what="#preview mentioning 'Second Page'")
            self.shot("edit.png")

        @self.check("the draft is autosaved (#draft-status says saved)", needs=("home_edit_url",))
        def _():
            if norm(page.value("form#editor textarea[name=markdown]")) != home_v1:
                page.fill("form#editor textarea[name=markdown]", home_v1)
            self.wait_status(r"\bsaved\b", timeout=15)
            st["draft_saved"] = True

        @self.check("reloading the edit view shows the draft's text and a 'draft' status",
                    needs=("home_edit_url", "draft_saved"))
        def _():
            page.reload()
            self.expect_editor("Home")
            text = norm(page.value("form#editor textarea[name=markdown]"))
            expect(text == home_v1, f"the textarea holds {text!r}, not the draft {home_v1!r}")
            status = page.text("#draft-status")
            expect(re.search(r"\bdraft\b", status, re.I), f"#draft-status is {status!r}")

        @self.check("an ended session loses no text: kept in the browser, a dialog signs in "
                    "again in place, then the draft saves (never the sign-in page in #preview)",
                    needs=("home_edit_url", "draft_saved"))
        def _():
            typed = home_v1 + "\nTyped after the session ended."
            page.clear_cookies()
            page.fill("form#editor textarea[name=markdown]", typed)
            page.wait_for("(() => { const d = document.querySelector('dialog#signin-dialog'); "
                          "return d && d.open; })()", timeout=20, what="the sign-in dialog, open")
            expect(not page.exists("#preview form"), "the preview holds a form (the sign-in page?)")
            kept = page.eval("localStorage.getItem('wikilog-unsaved:' + "
                             "document.querySelector('form#editor').getAttribute('action'))")
            expect(kept and "Typed after the session ended." in kept,
                   f"the browser did not keep the typed text: {kept!r}")
            self.shot("edit-session-ended.png")
            page.fill("dialog#signin-dialog input[name=name]", alice)
            page.fill("dialog#signin-dialog input[name=password]", self.creds["alice"][1])
            page.click("dialog#signin-dialog button[type=submit]")
            self.wait_status(r"\bsaved\b", timeout=20)
            page.reload()
            self.expect_editor("Home")
            text = norm(page.value("form#editor textarea[name=markdown]"))
            expect(text == norm(typed), f"after signing in again the draft is {text!r}")
            # Back to the scenario's text.
            page.fill("form#editor textarea[name=markdown]", home_v1)
            self.wait_status(r"\bsaved\b", timeout=15)

        @self.check("publishing Home shows h1 'Home' and a missing-page link to Second Page",
                    needs=("home_edit_url",))
        def _():
            if not page.exists("form#editor") or "Home" not in self.path():
                self.go(st["home_edit_url"])
            if norm(page.value("form#editor textarea[name=markdown]")) != home_v1:
                page.fill("form#editor textarea[name=markdown]", home_v1)
            self.publish()
            self.expect_page_view("Home")
            h1 = page.text("article#content h1")
            expect(h1.strip() == "Home", f"article#content h1 is {h1!r}")
            link = page.mark("article#content a.missing-page", "Second Page")
            classes = page.eval(f"document.querySelector({js(link)}).className")
            expect("wikilink" in classes.split(), f"the missing link's classes are {classes!r}")
            href = urlsplit(page.href(link))
            expect(unquote(href.path).endswith("/Second Page") and
                   urllib.parse.parse_qs(href.query).get("action") == ["edit"],
                   f"the missing link's href is {page.href(link)}")
            last = page.text("#last-change")
            expect(word_re(alice).search(last), f"#last-change is {last!r}")
            for sel in ("a#edit", "a#history", "a#blame"):
                expect(page.exists(sel), f"no {sel}")
            self.shot("page.png")
            url = urlsplit(page.url)
            st["home_url"] = f"{url.scheme}://{url.netloc}{url.path}"

        # 4. Second Page through the missing link ------------------------------------------

        @self.check("following the missing link opens the editor of Second Page", needs=("home_url",))
        def _():
            if self.path() != unquote(urlsplit(st["home_url"]).path):
                self.go(st["home_url"])
            link = page.mark("article#content a.missing-page", "Second Page")
            self.follow(link)
            self.expect_editor("Second Page")
            expect(self.query().get("action") == ["edit"], f"expected ?action=edit, {self.where()}")
            st["second_edit"] = True

        @self.check("publishing Second Page shows it", needs=("second_edit",))
        def _():
            page.fill("form#editor textarea[name=markdown]", second_text)
            self.publish()
            self.expect_page_view("Second Page")
            expect("This is the second page." in self.content_text(), f"content: {self.content_text()!r}")
            url = urlsplit(page.url)
            st["second_url"] = f"{url.scheme}://{url.netloc}{url.path}"

        @self.check("Second Page's #backlinks list Home", needs=("second_url",))
        def _():
            if self.path() != unquote(urlsplit(st["second_url"]).path):
                self.go(st["second_url"])
            items = page.texts("#backlinks li")
            expect(any("Home" in t for t in items), f"#backlinks li: {items}")

        @self.check("back on Home, the link to Second Page is a wikilink without missing-page",
                    needs=("second_url", "home_url"))
        def _():
            if page.exists("#backlinks li a"):
                self.follow(page.mark("#backlinks li a", "Home", exact=False))
            else:
                self.go(st["home_url"])
            self.expect_page_view("Home")
            link = page.mark("article#content a.wikilink", "Second Page")
            classes = page.eval(f"document.querySelector({js(link)}).className").split()
            expect("missing-page" not in classes, f"the link's classes are {classes}")
            href = page.href(link)
            expect(urlsplit(href).path == urlsplit(st["second_url"]).path and not urlsplit(href).query,
                   f"the link goes to {href}, not {st['second_url']}")

        @self.check("the wiki lists Home and Second Page (#pages li > a.page)", needs=("wiki_url",))
        def _():
            self.go(st["wiki_url"])
            names = [t.strip() for t in page.texts("#pages li > a.page")]
            expect("Home" in names and "Second Page" in names, f"#pages: {names}")
            if st.get("second_url"):
                href = page.href(page.mark("#pages li > a.page", "Second Page"))
                expect(urlsplit(href).path == urlsplit(st["second_url"]).path, f"a.page href {href}")
            expect(page.exists("a#conflicts") and page.exists("a#settings"), "no a#conflicts or a#settings")

        @self.check("API: alice's GET /wiki gives an update_seq (remembered for as_of)", needs=("home_url",))
        def _():
            status, info = self.api("GET", "/wiki", "alice")
            expect(status == 200 and isinstance(info, dict) and "update_seq" in info,
                   f"GET /wiki as {alice}: {status} {str(info)[:200]}")
            time.sleep(1.2)
            st["iso"] = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
            time.sleep(1.2)
            # CouchDB's opaque "N-TAG" as the API gives it; the UI speaks of event N.
            st["seq_text"] = str(info["update_seq"])
            st["seq"] = st["seq_text"].split("-")[0]

        # 5. a second edit, history, blame, an old revision --------------------------------

        @self.check("alice edits Home again (a#edit) and publishes", needs=("home_url",))
        def _():
            self.go(st["home_url"])
            self.follow("a#edit")
            self.expect_editor("Home")
            current = norm(page.value("form#editor textarea[name=markdown]"))
            expect("[[Second Page]]" in current, f"the editor does not hold Home's text: {current!r}")
            page.fill("form#editor textarea[name=markdown]", home_v2)
            self.publish()
            self.expect_page_view("Home")
            expect("A second line, added later." in self.content_text(), f"content: {self.content_text()!r}")
            st["home_v2"] = True

        @self.check("history: two or more revisions by alice, newest first, a diff with a + line",
                    needs=("home_v2",))
        def _():
            self.go(st["home_url"])
            self.follow("a#history")
            expect(self.query().get("action") == ["history"], f"a#history led to {page.url}")
            revs = page.eval(JS_HISTORY)
            expect(len(revs) >= 2, f"{len(revs)} li.revision")
            for i, r in enumerate(revs[:2]):
                expect(r["author"] and word_re(alice).search(r["author"]), f"revision {i} author {r['author']!r}")
                for key in ("rev", "time", "origin", "diff", "view"):
                    expect(r[key] is not None, f"revision {i} lacks its {key}")
                expect(r["rev"] and r["time"], f"revision {i}: empty .rev or .time")
            plus = [ln for ln in revs[0]["diff"].splitlines() if ln.startswith("+") and not ln.startswith("+++")]
            expect(any("A second line, added later." in ln for ln in plus),
                   f"the newest diff has no '+A second line...' line: {revs[0]['diff'][:300]!r}")
            expect(revs[-1]["view"] and urllib.parse.parse_qs(urlsplit(revs[-1]["view"]).query).get("rev"),
                   f"the oldest revision's a.view href is {revs[-1]['view']}")
            self.shot("history.png")
            st["history_count"] = len(revs)

        @self.check("blame: one row per line of Home, each by alice, line 3 from a later revision",
                    needs=("home_v2",))
        def _():
            self.go(st["home_url"])
            self.follow("a#blame")
            expect(self.query().get("action") == ["blame"], f"a#blame led to {page.url}")
            rows = page.eval(JS_BLAME)
            while rows and not (rows[-1]["text"] or "").strip():  # a final newline's empty row
                rows.pop()
            lines = home_v2.split("\n")
            texts = [(r["text"] or "").strip() for r in rows]
            expect(texts == [ln.strip() for ln in lines], f"td.text per row: {texts}, expected {lines}")
            for i, r in enumerate(rows):
                expect(r["author"] and word_re(alice).search(r["author"]), f"row {i} author {r['author']!r}")
                expect((r["rev"] or "").strip() and (r["time"] or "").strip(), f"row {i}: empty td.rev or td.time")
            expect(rows[2]["rev"].strip() != rows[0]["rev"].strip(),
                   f"line 3 was added by a later revision, yet its td.rev equals line 1's ({rows[0]['rev']!r})")
            self.shot("blame.png")

        @self.check("viewing the first revision (a.view) shows the old text with #old-revision",
                    needs=("home_v2",))
        def _():
            self.go(st["home_url"])
            self.follow("a#history")
            oldest = page.mark("ol#history > li.revision a.view", predicate=(
                "el.closest('li.revision') === Array.from(document.querySelectorAll('ol#history > li.revision')).pop()"))
            self.follow(oldest)
            expect(self.query().get("rev"), f"a.view led to {page.url}")
            page.wait_for_selector("#old-revision", visible=True)
            text = self.content_text()
            expect("Second Page" in text and "A second line" not in text, f"old revision's content: {text!r}")
            expect(page.exists("form#restore"), "no form#restore")
            st["old_rev_url"] = page.url

        # 6. time travel ------------------------------------------------------------------

        @self.check("as_of=SEQ (before the second edit) shows Home's old text with #asof-bar",
                    needs=("seq", "home_url", "home_v2"))
        def _():
            status = self.go(st["home_url"] + "?as_of=" + quote(st["seq_text"], safe=""))
            expect(status == 200, f"status {status}, {self.where()}")
            page.wait_for_selector("#asof-bar", visible=True)
            text = self.content_text()
            expect("Second Page" in text, f"as-of content lacks the old text: {text!r}")
            expect("A second line" not in text, f"as-of content shows the newer text: {text!r}")
            self.shot("asof.png")

        @self.check("as_of=ISO time (before the second edit) shows Home's old text",
                    needs=("iso", "home_url", "home_v2"))
        def _():
            status = self.go(st["home_url"] + "?as_of=" + quote(st["iso"], safe=""))
            expect(status == 200, f"status {status}, {self.where()}")
            page.wait_for_selector("#asof-bar", visible=True)
            text = self.content_text()
            expect("Second Page" in text and "A second line" not in text, f"as-of content: {text!r}")

        @self.check("as_of=SEQ on the wiki URL shows #asof-bar and the pages then", needs=("seq", "wiki_url"))
        def _():
            status = self.go(st["wiki_url"] + "?as_of=" + quote(st["seq"], safe=""))
            expect(status == 200, f"status {status}, {self.where()}")
            page.wait_for_selector("#asof-bar", visible=True)
            names = [t.strip() for t in page.texts("#pages li > a.page")]
            expect("Home" in names and "Second Page" in names, f"#pages then: {names}")

        @self.check("as of SEQ every panel shows then: the bar says the date and event, backlinks "
                    "then, links keep as_of, no form that writes", needs=("seq", "second_url", "wiki_url"))
        def _():
            status = self.go(st["second_url"] + "?as_of=" + quote(st["seq"], safe=""))
            expect(status == 200, f"status {status}, {self.where()}")
            bar = page.text("#asof-bar")
            expect(re.search(r"as of \d{1,2} \w{3} \d{4} \d\d:\d\d:\d\d UTC, event " + re.escape(st["seq"]), bar),
                   f"#asof-bar says {bar!r}")
            backlinks = page.eval("Array.from(document.querySelectorAll('#backlinks li a'), a => a.href)")
            expect(any(unquote(urlsplit(h).path).endswith("/Home") and f"as_of={st['seq']}" in h
                       for h in backlinks), f"#backlinks as of then: {backlinks}")
            links = page.eval("Array.from(document.querySelectorAll('main a'), a => a.getAttribute('href'))")
            leaving = [h for h in links if h and "/_wiki/" + quote(st["wiki_id"], safe="") in h
                       and "as_of=" not in h]
            expect(not leaving, f"links that drop as_of: {leaving}")
            forms = page.eval("Array.from(document.querySelectorAll('main form'), f => f.id || f.action)")
            expect(not forms, f"forms in the as-of page: {forms}")
            self.shot("asof-page.png")
            self.go(st["wiki_url"] + "?as_of=" + quote(st["seq"], safe=""))
            page.wait_for_selector("#asof-bar", visible=True)
            expect(not page.exists("form#new-page"), "the wiki as of then offers form#new-page")
            hrefs = page.eval("Array.from(document.querySelectorAll('#pages li > a.page'), a => a.href)")
            expect(hrefs and all(f"as_of={st['seq']}" in h for h in hrefs), f"#pages hrefs: {hrefs}")
            self.shot("asof-wiki.png")

        @self.check("as_of=abc and as_of=100000000 are errors in the app's own frame", needs=("home_url",))
        def _():
            for value, heading in (("abc", "Not a moment"), ("100000000", "No such moment")):
                status = self.go(st["home_url"] + "?as_of=" + value)
                expect(status == 400, f"as_of={value}: status {status}, {self.where()}")
                expect(page.exists("#user") and page.exists("header.top"), f"as_of={value}: no app header")
                h1s = page.texts("h1")
                expect(h1s == [heading], f"as_of={value}: h1s {h1s}")
            self.shot("asof-error.png")

        @self.check("history offers the wiki as of each revision (a.wiki-asof)", needs=("home_url",))
        def _():
            self.go(st["home_url"] + "?action=history")
            self.follow("ol#history > li.revision a.wiki-asof")
            page.wait_for_selector("#asof-bar", visible=True)
            expect(self.query().get("as_of"), f"a.wiki-asof led to {page.url}")
            expect(page.exists("#pages li > a.page"), f"no pages as of that revision, {self.where()}")

        @self.check("form#restore on the first revision writes it as a new revision", needs=("old_rev_url",))
        def _():
            self.go(st["old_rev_url"])
            self.send("form#restore")
            self.expect_page_view("Home")
            text = self.content_text()
            expect("Second Page" in text and "A second line" not in text, f"content after restore: {text!r}")
            self.follow("a#history")
            count = len(page.eval(JS_HISTORY))
            expect(count == st.get("history_count", 2) + 1, f"{count} revisions after the restore")

        # 6b. delete a page, then restore it ------------------------------------------------

        scratch_text = "# Scratch Page\nWritten to be deleted, then restored."

        @self.check("API: alice writes Scratch Page", needs=("wiki_id", "home_url"))
        def _():
            status, body = self.api("PUT", self.doc_path("Scratch Page"), "alice",
                                    {"type": "page", "wiki_id": st["wiki_id"], "markdown": scratch_text})
            expect(status == 201, f"PUT answered {status}: {body}")
            st["scratch_url"] = st["wiki_url"] + quote("Scratch Page")

        @self.check("a#delete asks first (form#page-delete, Keep it), then deletes the page: its address "
                    "says who deleted it and when, with its history and a Restore button", needs=("scratch_url",))
        def _():
            self.go(st["scratch_url"])
            self.follow("a#delete")
            page.wait_for_selector("form#page-delete")
            expect(page.texts("h1") == ["Delete the page “Scratch Page”?"], f"h1s: {page.texts('h1')}")
            expect(page.exists("form#page-delete a[href]"), "no Keep it link")
            self.shot("page-delete.png")
            page.click("form#page-delete button[type=submit]", navigate=True)
            self.audit()
            expect(self.path().endswith("/Scratch Page") and not self.query(), f"after deleting, {self.where()}")
            notice = page.text("#deleted-notice")
            expect(re.search(r"This page was deleted by " + re.escape(alice) + r" on \d{1,2} \w{3} \d{4} "
                             r"\d\d:\d\d:\d\d UTC\.", notice), f"#deleted-notice says {notice!r}")
            expect("does not exist yet" not in page.text("main"), "the page says it does not exist yet")
            expect(page.exists("a#deleted-history") and page.exists("form#undelete button[type=submit]"),
                   "no history link or Restore button")
            status, body = self.api("GET", self.doc_path("Scratch Page"), "alice")
            expect(status == 404 and isinstance(body, dict) and body.get("reason") == "deleted",
                   f"API: GET answered {status} {body}")
            self.shot("page-deleted.png")
            st["scratch_deleted"] = True

        @self.check("the history lists the deletion and recent changes shows the page deleted",
                    needs=("scratch_deleted",))
        def _():
            self.go(st["scratch_url"] + "?action=history")
            first = page.text("ol#history > li.revision:first-child")
            expect("deleted the page" in first and alice in first, f"newest history entry: {first!r}")
            self.shot("history-deleted.png")
            self.go(self.ui("_recent"))
            row = page.mark("ol#recent li", "Scratch Page", exact=False)
            expect("deleted" in page.text(row), f"recent changes row: {page.text(row)!r}")
            self.shot("recent-deleted.png")

        @self.check("Restore brings the page back as a new revision", needs=("scratch_deleted",))
        def _():
            self.go(st["scratch_url"])
            self.send("form#undelete")
            self.expect_page_view("Scratch Page")
            expect("Written to be deleted, then restored." in self.content_text(),
                   f"content after restoring: {self.content_text()!r}")
            self.follow("a#history")
            count = len(page.eval(JS_HISTORY))
            expect(count == 3, f"{count} revisions after the restore (written, deleted, restored)")

        # 6c. a page that is only a draft, and My drafts ------------------------------------

        @self.check("a page that is only alice's autosaved draft says so and opens it; My drafts lists it",
                    needs=("wiki_url",))
        def _():
            self.new_page("Draft Only")
            page.fill("form#editor textarea[name=markdown]", "# Draft Only\nNot published yet.")
            self.wait_status(r"\bsaved\b", timeout=15)
            self.go(st["wiki_url"] + quote("Draft Only"))
            page.wait_for_selector("#draft-notice")
            expect("does not exist yet" not in page.text("main"), "the page says it does not exist yet")
            self.shot("draft-page.png")
            self.follow("a#nav-drafts")
            link = page.mark("#drafts li a.draft", "Draft Only")
            expect("a new page" in page.text("#drafts"), f"#drafts: {page.text('#drafts')!r}")
            self.shot("drafts.png")
            self.follow(link)
            self.expect_editor("Draft Only")
            text = norm(page.value("form#editor textarea[name=markdown]"))
            expect(text == "# Draft Only\nNot published yet.", f"the editor holds {text!r}")
            # Discard from the list: back on it, without the draft.
            self.go(self.ui("_drafts"))
            button = page.mark("#drafts li form.discard-draft button",
                               predicate="el.closest('li').textContent.includes('Draft Only')")
            self.send(button)
            expect(self.path() == "/_wiki/_drafts", f"after Discard, {self.where()}")
            expect("Draft Only" not in page.text("#drafts"), f"#drafts still lists it: {page.text('#drafts')!r}")

        # 7. a conflict made through the API, resolved in the UI ---------------------------

        @self.check("API: two sibling revisions of Home written with _bulk_docs new_edits=false",
                    needs=("wiki_id", "home_url"))
        def _():
            path = self.doc_path("Home")
            status, doc = self.api("GET", path, "admin")
            expect(status == 200 and isinstance(doc, dict), f"GET {path}: {status} {str(doc)[:200]}")
            gen, parent = doc["_rev"].split("-", 1)
            gen = int(gen) + 1
            body = {k: v for k, v in doc.items() if not k.startswith("_")}
            hashes = [secrets.token_hex(16), secrets.token_hex(16)]
            while hashes[1] == hashes[0]:
                hashes[1] = secrets.token_hex(16)
            leaves = {}
            docs = []
            for label, h in zip("AB", hashes):
                marker = f"Leaf {label} {self.rand}"
                rev = f"{gen}-{h}"
                leaves[rev] = marker
                docs.append(dict(body, _id=doc["_id"], _rev=rev, _revisions={"start": gen, "ids": [h, parent]},
                                 markdown=f"# Home\n{marker}\nSee [[Second Page]]."))
            status, answer = self.api("POST", "/wiki/_bulk_docs", "admin", {"new_edits": False, "docs": docs})
            expect(status in (200, 201, 202), f"_bulk_docs: {status} {str(answer)[:300]}")
            expect(not any(isinstance(a, dict) and a.get("error") for a in (answer or [])), f"_bulk_docs: {answer}")
            status, now = self.api("GET", path + "?conflicts=true", "admin")
            expect(status == 200 and now.get("_rev") in leaves and set(now.get("_conflicts", [])) & set(leaves),
                   f"after _bulk_docs, Home is {now.get('_rev')} with _conflicts {now.get('_conflicts')}")
            st["winner"] = now["_rev"]
            st["loser"] = next(r for r in leaves if r != now["_rev"])
            st["leaves"] = leaves

        @self.check("Home shows #conflict-banner with a#resolve (and the winning leaf's text)", needs=("leaves",))
        def _():
            self.go(st["home_url"])
            page.wait_for_selector("#conflict-banner", visible=True)
            expect(page.exists("#conflict-banner a#resolve"), "no a#resolve in #conflict-banner")
            expect(page.attr("a#resolve", "href"), "a#resolve has no href")
            text = self.content_text()
            expect(st["leaves"][st["winner"]] in text, f"the page does not show the winning leaf: {text!r}")

        @self.check("?action=conflicts (a#conflicts) lists Home with both leaves", needs=("leaves", "wiki_url"))
        def _():
            self.go(st["wiki_url"])
            self.follow("a#conflicts")
            expect(self.query().get("action") == ["conflicts"], f"a#conflicts led to {page.url}")
            markers = list(st["leaves"].values())
            section = page.mark("section.conflict", predicate=" && ".join(
                f"el.textContent.includes({js(m)})" for m in markers))
            leaves = page.eval(f"Array.from(document.querySelectorAll({js(section + ' .leaf')}), l => ({{"
                               "pre: l.querySelector('pre') ? l.querySelector('pre').textContent : null, "
                               "keep: Array.from(l.querySelectorAll('button[name=keep]'), "
                               "b => (b.closest('form.resolve') ? '' : 'outside form.resolve: ') + b.value)}))")
            expect(len(leaves) == 2, f"{len(leaves)} .leaf in the section")
            for rev, marker in st["leaves"].items():
                match = [leaf for leaf in leaves if leaf["pre"] and marker in leaf["pre"]]
                expect(len(match) == 1, f"no single .leaf pre with {marker!r}")
                expect(any(v == rev or v.endswith(rev.split("-", 1)[1]) for v in match[0]["keep"]),
                       f"the leaf of {marker!r} has keep values {match[0]['keep']}, not {rev}")
            self.shot("conflicts.png")
            url = urlsplit(page.url)
            st["conflicts_url"] = f"{url.scheme}://{url.netloc}{url.path}?{url.query}"

        @self.check("keeping the losing leaf resolves the conflict: no banner, its text shown",
                    needs=("conflicts_url", "leaves"))
        def _():
            if page.url != st["conflicts_url"]:
                self.go(st["conflicts_url"])
            keep, drop = st["loser"], st["winner"]
            button = page.mark("section.conflict .leaf button[name=keep]", predicate=(
                f"!!el.closest('form.resolve') && "
                f"(el.value === {js(keep)} || el.value.endsWith({js(keep.split('-', 1)[1])}))"))
            self.send(button)
            self.expect_page_view("Home")
            expect(not page.exists("#conflict-banner"), "#conflict-banner is still shown")
            text = self.content_text()
            expect(st["leaves"][keep] in text, f"the page does not show the kept leaf: {text!r}")
            expect(st["leaves"][drop] not in text, f"the page still shows the other leaf: {text!r}")
            status, now = self.api("GET", self.doc_path("Home") + "?conflicts=true", "admin")
            expect(status == 200 and not now.get("_conflicts"), f"API still has _conflicts {now.get('_conflicts')}")
            expect(st["leaves"][keep] in now.get("markdown", ""), "API: the kept leaf's text is not current")

        # 8. carol sees nothing of the wiki -------------------------------------------------

        @self.check("alice signs out with form#signout; /_wiki/ then asks to sign in", needs=("alice_in",))
        def _():
            self.sign_out()
            self.go(self.ui())
            expect(self.path() == "/_wiki/_signin", f"after sign-out, /_wiki/ gives {self.where()}")

        @self.check("signed out, a wiki page redirects to the sign-in page with next", needs=("home_url",))
        def _():
            self.go(st["home_url"])
            expect(self.path() == "/_wiki/_signin", f"expected the sign-in page, {self.where()}")
            nxt = self.query().get("next", [""])[0]
            expect(nxt and "/_wiki/" in unquote(nxt), f"next is {nxt!r}")
            self.expect_title_absent("the sign-in page")

        @self.check(f"carol ({carol}) signs in")
        def _():
            page.clear_cookies()
            self.sign_in("carol")
            st["carol_in"] = True

        @self.check("carol's /_wiki/ does not list the wiki", needs=("carol_in",))
        def _():
            self.go(self.ui())
            page.wait_for_selector("#user")  # #wikis may be left out when carol has no wiki
            titles = [t.strip() for t in page.texts("#wikis li a.wiki")]
            expect(self.title not in titles, f"carol's wikis: {titles}")
            self.expect_title_absent("carol's /_wiki/")

        @self.check("carol gets 404 #not-found for the wiki", needs=("carol_in", "wiki_url"))
        def _():
            self.go(st["wiki_url"])
            self.expect_not_found("the wiki")

        @self.check("carol gets 404 #not-found for Home", needs=("carol_in", "home_url"))
        def _():
            self.go(st["home_url"])
            self.expect_not_found("Home")
            self.shot("notfound.png")

        @self.check("carol gets 404 for the wiki's other views (settings, conflicts, history, blame, "
                    "edit, as_of, Second Page)", needs=("carol_in", "wiki_url", "home_url"))
        def _():
            urls = [st["wiki_url"] + "?action=settings", st["wiki_url"] + "?action=conflicts",
                    st["home_url"] + "?action=history", st["home_url"] + "?action=blame",
                    st["home_url"] + "?action=edit"]
            if st.get("seq"):
                urls.append(st["home_url"] + "?as_of=" + quote(st["seq"], safe=""))
            if st.get("second_url"):
                urls.append(st["second_url"])
            for url in urls:
                self.go(url)
                self.expect_not_found(urlsplit(url).path + "?" + urlsplit(url).query)

        @self.check("carol's /_wiki/_recent does not mention the wiki", needs=("carol_in",))
        def _():
            self.go(self.ui("_recent"))
            page.wait_for_selector("#user")
            time.sleep(1.0)  # the list is live: give its script a moment to add rows
            self.expect_title_absent("carol's /_wiki/_recent")

        # 9. hostile Markdown ---------------------------------------------------------------

        @self.check("alice signs in again")
        def _():
            if st.get("carol_in"):
                self.sign_out()
            page.clear_cookies()
            # A sign-in form whose token cookie was just cleared has expired: load a fresh one.
            self.go(self.ui("_signin"))
            self.sign_in("alice")
            st["alice_again"] = True

        xss_md = ("# XSS Test\n"
                  "<script>window.__xss=1</script>\n\n"
                  "<img src=x onerror=\"window.__xss=2\">\n\n"
                  "[x](javascript:window.__xss=3)\n\n"
                  "[[<b onmouseover=window.__xss=4>x</b>]]\n")

        @self.check("XSS: the editor's #preview of hostile Markdown runs nothing",
                    needs=("alice_again", "wiki_url"))
        def _():
            self.new_page("XSS Test")
            page.fill("form#editor textarea[name=markdown]", xss_md)
            page.wait_for("document.querySelector('#preview').textContent.includes('XSS Test')",
                          what="#preview showing 'XSS Test'")
            time.sleep(1.0)  # an <img onerror> would have fired by now
            probe = page.eval(JS_XSS_PROBE + "('#preview')")
            expect(probe["xss"] is None, f"window.__xss = {probe['xss']} in the editor")
            expect(probe["scripts"] == 0, f"{probe['scripts']} script elements in #preview")
            st["xss_editor"] = True

        @self.check("XSS: the hostile page is published", needs=("xss_editor",))
        def _():
            if norm(page.value("form#editor textarea[name=markdown]")) != norm(xss_md):
                page.fill("form#editor textarea[name=markdown]", xss_md)
            self.publish()
            self.expect_page_view("XSS Test")
            time.sleep(1.0)
            st["xss_probe"] = page.eval(JS_XSS_PROBE + "('article#content')")
            expect(st["xss_probe"]["scope"], "no article#content")

        @self.check("XSS: window.__xss is undefined on the page view", needs=("xss_probe",))
        def _():
            probe = page.eval(JS_XSS_PROBE + "('article#content')")
            expect(st["xss_probe"]["xss"] is None and probe["xss"] is None,
                   f"window.__xss = {probe['xss'] or st['xss_probe']['xss']}")

        @self.check("XSS: no element has an on* attribute", needs=("xss_probe",))
        def _():
            expect(not st["xss_probe"]["onAttrs"], f"on* attributes: {st['xss_probe']['onAttrs'][:10]}")

        @self.check("XSS: no javascript: link", needs=("xss_probe",))
        def _():
            expect(not st["xss_probe"]["jsLinks"], f"javascript: links: {st['xss_probe']['jsLinks'][:5]}")

        @self.check("XSS: no script element inside article#content", needs=("xss_probe",))
        def _():
            expect(st["xss_probe"]["scripts"] == 0, f"{st['xss_probe']['scripts']} script elements")

        # 10. more of the contract: merges on publish, recent changes, sync ----------------

        def api_set(page_name: str, markdown: str) -> None:
            path = self.doc_path(page_name)
            status, doc = self.api("GET", path, "alice")
            expect(status == 200, f"GET {path} as {alice}: {status} {str(doc)[:200]}")
            doc["markdown"] = markdown
            status, answer = self.api("PUT", path, "alice", doc)
            expect(status in (201, 202), f"PUT {path} as {alice}: {status} {str(answer)[:200]}")

        def open_editor(url: str, page_name: str) -> None:
            self.go(url)
            self.follow("a#edit")
            self.expect_editor(page_name)

        @self.check("publishing over a concurrent overlapping change answers #merge-conflict with markers",
                    needs=("alice_again", "second_url"))
        def _():
            open_editor(st["second_url"], "Second Page")
            api_set("Second Page", "# Second Page\nChanged through the API.")
            page.fill("form#editor textarea[name=markdown]", "# Second Page\nChanged in the browser.")
            self.publish()
            page.wait_for_selector("#merge-conflict")
            merged = page.value("form#editor textarea[name=markdown]")
            expect("<<<<<<<" in merged and ">>>>>>>" in merged, f"no conflict markers in {merged!r}")
            expect("Changed through the API." in merged and "Changed in the browser." in merged,
                   f"the merged text lacks a side: {merged!r}")
            # The preview shows the change's versions side by side, never the markers as Markdown.
            page.wait_for_selector("#preview .hunk button[data-choice=theirs]")
            headings = " ".join(page.texts("#preview h1, #preview h2, #preview h3"))
            expect("=======" not in headings and "<<<<<<<" not in headings,
                   f"markers rendered as headings: {headings!r}")
            expect(not page.exists("#preview blockquote"), "markers rendered as a blockquote")
            self.shot("edit-conflict.png")
            st["merge_conflict"] = True

        @self.check("Publish is refused while conflict markers remain; keeping one version settles it",
                    needs=("merge_conflict",))
        def _():
            before = page.eval("location.href")
            page.click("button#publish")
            self.page.wait_for("/Settle each change/.test(document.querySelector('#draft-status').textContent)",
                               what="#draft-status asking to settle the changes")
            expect(page.eval("location.href") == before, "the page was left with markers in it")
            page.click("#preview .hunk button[data-choice=mine]")
            settled = page.value("form#editor textarea[name=markdown]")
            expect("<<<<<<<" not in settled and "Changed in the browser." in settled
                   and "Changed through the API." not in settled, f"after keeping mine: {settled!r}")

        @self.check("after resolving the markers by hand, publishing succeeds", needs=("merge_conflict",))
        def _():
            page.fill("form#editor textarea[name=markdown]", "# Second Page\nChanged in both places.")
            self.publish()
            self.expect_page_view("Second Page")
            expect("Changed in both places." in self.content_text(), f"content: {self.content_text()!r}")

        @self.check("publishing over a concurrent change to other lines merges cleanly",
                    needs=("alice_again", "second_url"))
        def _():
            lines = ["# Second Page", "one", "two", "three", "four"]
            api_set("Second Page", "\n".join(lines))
            open_editor(st["second_url"], "Second Page")
            api_set("Second Page", "\n".join(["# Second Page", "one (api)", "two", "three", "four"]))
            page.fill("form#editor textarea[name=markdown]",
                      "\n".join(["# Second Page", "one", "two", "three", "four (browser)"]))
            self.publish()
            expect(not page.exists("#merge-conflict"), f"a merge conflict for separate lines, {self.where()}")
            self.expect_page_view("Second Page")
            text = self.content_text()
            expect("one (api)" in text and "four (browser)" in text, f"merged content: {text!r}")

        @self.check("alice's /_wiki/_recent lists changes of her wiki", needs=("alice_again", "home_url"))
        def _():
            self.go(self.ui("_recent"))
            wanted = [self.title, "Home", "Second Page"]
            try:  # live: rows may arrive after the page has loaded
                page.wait_for("Array.from(document.querySelectorAll('ol#recent li')).some(li => "
                              f"{js(wanted)}.some(w => li.textContent.includes(w)))",
                              what="an ol#recent li naming the wiki or one of its pages")
            except Exception:
                items = page.texts("ol#recent li")
                raise CheckFailed(f"no ol#recent li names the wiki or its pages; rows: {items[:5]}") from None

        @self.check("Settings makes alice's feed token; her wiki advertises its Atom feed "
                    "(link rel=alternate), which a reader without cookies reads with the token",
                    needs=("alice_again", "wiki_url"))
        def _():
            self.go(self.ui("_settings"))
            page.wait_for_selector("form#feed-token-form")
            self.send("form#feed-token-form button[value=token]")
            page.wait_for_selector("code#token")
            expect(page.exists("#settings-saved"), f"no #settings-saved, {self.where()}")
            self.shot("settings.png")
            self.go(st["wiki_url"])
            href = page.eval("(() => { const l = document.querySelector("
                             "'link[rel=alternate][type=\"application/atom+xml\"]'); "
                             "return l ? l.href + '\\n' + l.title : null; })()")
            expect(href, f"no link rel=alternate of type application/atom+xml on the wiki, {self.where()}")
            url, title = href.split("\n", 1)
            expect("token=wlt_" in url and self.title in title, f"the feed link is {url!r} titled {title!r}")
            with OPENER.open(urllib.request.Request(url), timeout=30) as resp:  # no cookie, no Basic
                kind, body = resp.headers.get("Content-Type", ""), resp.read()
            expect(kind.startswith("application/atom+xml"), f"the feed is {kind!r}")
            import xml.etree.ElementTree as ET
            atom = "{http://www.w3.org/2005/Atom}"
            root = ET.fromstring(body)
            expect(root.tag == atom + "feed", f"the feed's root is {root.tag}")
            for name in ("id", "title", "updated"):
                expect((root.findtext(atom + name) or "").strip(), f"the feed has no {name}")
            entries = root.findall(atom + "entry")
            expect(entries and all(e.findtext(f"{atom}author/{atom}name") for e in entries),
                   f"{len(entries)} entries, each with an author")
            wrong = urllib.request.Request(url.split("token=")[0] + "token=wlt_0")
            try:
                OPENER.open(wrong, timeout=30)
                raise CheckFailed("a wrong token read the feed")
            except urllib.error.HTTPError as e:
                expect(e.code == 401, f"a wrong token answers {e.code}")
            self.go(self.ui("_recent?wiki=" + quote(st["wiki_id"])))
            page.wait_for_selector("ol#recent li.edit a.diff")
            self.shot("recent-wiki.png")

        @self.check("a wiki's own recent changes are live: an edit of it appears without a reload, "
                    "with revision and diff links; another wiki's does not", needs=("alice_again", "home_url"))
        def _():
            self.go(self.ui("_recent?wiki=" + quote(st["wiki_id"])))
            page.wait_for_selector("ol#recent[data-wiki] li.edit")
            before = len(page.texts("ol#recent li"))
            # First a change of another wiki of alice's, then one of this wiki: the feed
            # delivers them in order, so once this wiki's row is there the other was seen.
            status, answer = self.api("PUT", "/wiki/e2e-live-other", "alice",
                                      {"type": "wiki", "title": "Another wiki", "owner_id": "alice",
                                       "members": []})
            expect(status in (201, 202), f"PUT another wiki: {status} {answer}")
            status, doc = self.api("GET", self.doc_path("Home"), "alice")
            expect(status == 200, f"GET Home: {status} {doc}")
            doc["markdown"] = doc.get("markdown", "") + "\nA line that arrives live."
            status, put = self.api("PUT", self.doc_path("Home"), "alice", doc)
            expect(status in (200, 201), f"PUT Home: {status} {put}")
            page.wait_for_selector("ol#recent li.live a.diff")
            rows = page.texts("ol#recent li.live")
            expect(len(rows) == 1 and "Home" in rows[0] and "revision " + put["rev"].split("-")[0] in rows[0],
                   f"live rows: {rows}")
            expect(len(page.texts("ol#recent li")) == before + 1, "one row more")
            expect("Another wiki" not in page.text("ol#recent") and "e2e-live-other" not in page.text("ol#recent"),
                   "another wiki's change appeared in this wiki's list")
            self.shot("recent-wiki-live.png")

        @self.check("alice watches Home; a change by another user then shows on My wikis, "
                    "with who and a diff link; Mark all as seen clears it",
                    needs=("alice_again", "home_url"))
        def _():
            self.go(st["home_url"])
            self.send("form.watch button#watch")
            expect("Stop watching" in page.text("form.watch button#watch"), f"not watching, {self.where()}")
            self.shot("page-watched.png")
            status, doc = self.api("GET", self.doc_path("Home"), "admin")
            expect(status == 200, f"GET Home as admin: {status} {doc}")
            doc["markdown"] = doc.get("markdown", "") + "\nA line the administrator added."
            status, put = self.api("PUT", self.doc_path("Home"), "admin", doc)
            expect(status in (200, 201), f"PUT Home as admin: {status} {put}")
            self.go(self.ui())
            page.wait_for_selector("ol#watch-changes li a.diff")
            rows = page.texts("ol#watch-changes li")
            expect(any("Home" in r and self.creds["admin"][0] in r for r in rows), f"watch rows: {rows}")
            self.shot("watch-changes.png")
            self.send("form#mark-seen button")
            page.wait_for_selector("#watch-nothing")

        @self.check("/_wiki/_sync offers to set up a sync, and alice has none yet", needs=("alice_again",))
        def _():
            self.go(self.ui("_sync"))
            page.wait_for_selector("form#sync-add")
            expect(page.exists("#no-syncs"), "a fresh Sync page has no #no-syncs")

        @self.check("the header's search box finds Home by a word of its body, the word marked",
                    needs=("alice_again", "home_url"))
        def _():
            self.go(st["home_url"])
            words = [w for w in re.findall(r"[A-Za-z]{5,}", self.content_text()) if w.lower() != "home"]
            expect(words, f"no word to search for in {self.content_text()!r}")
            word = max(words, key=len)
            page.fill("form#search input[name=q]", word)
            page.submit("form#search")
            page.wait_for_selector("ol#results li.hit")
            titles = page.texts("ol#results li.hit a.title")
            expect("Home" in titles, f"results: {titles}")
            marks = page.texts("ol#results li.hit .snippet mark")
            expect(any(m.lower() == word.lower() for m in marks), f"{word!r} is not among the marked: {marks}")
            self.shot("search.png")

        @self.check("a picture dropped on the editor is uploaded, the preview shows the ![pixel](pixel.png) already typed without another keystroke, and the page shows it inline",
                    needs=("alice_again", "home_url"))
        def _():
            self.go(st["home_url"] + "?action=edit")
            page.wait_for_selector("#attach[data-upload]")
            # The text names the picture before it exists: the preview draws it broken.
            text = page.value("form#editor textarea[name=markdown]")
            page.fill("form#editor textarea[name=markdown]", text.rstrip() + "\n\n![pixel](pixel.png)\n")
            page.wait_for("!!document.querySelector('#preview img[alt=pixel]')", timeout=15,
                          what="the preview drawing the picture named in the text")
            # A 1×1 PNG, dropped as a file would be from the desktop.
            page.eval("""(() => {
              const b64 = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==';
              const bytes = Uint8Array.from(atob(b64), c => c.charCodeAt(0));
              const data = new DataTransfer();
              data.items.add(new File([bytes], 'pixel.png', { type: 'image/png' }));
              const target = document.getElementById('attach');
              target.dispatchEvent(new DragEvent('drop', { dataTransfer: data, bubbles: true, cancelable: true }));
              return true;
            })()""")
            page.wait_for("(() => /Uploaded pixel\\.png/.test(document.getElementById('upload-status').textContent))()",
                          timeout=15, what="#upload-status saying the picture is uploaded")
            expect("pixel.png" in " ".join(page.texts("#file-list li")), "pixel.png is not in the file list")
            page.wait_for("(() => { const i = document.querySelector('#preview img[alt=pixel]');"
                          " return !!i && i.complete && i.naturalWidth > 0; })()",
                          timeout=15, what="the preview showing the uploaded picture (naturalWidth > 0)")
            self.publish()
            page.wait_for("(() => { const i = document.querySelector('#content img[alt=pixel]');"
                          " return !!i && i.complete && i.naturalWidth > 0; })()",
                          timeout=15, what="the picture shown inline (naturalWidth > 0)")
            expect(page.exists("section#files"), "the page lists no files")
            self.shot("files.png")

        @self.check("the editor's toolbar wraps the selection in Markdown (Bold, a wiki link, a list), Ctrl+I too, the preview follows, and Markdown help opens",
                    needs=("alice_again", "home_url"))
        def _():
            self.go(st["home_url"] + "?action=edit")
            page.wait_for_selector("#md-toolbar button[data-md=bold]")
            area = "form#editor textarea[name=markdown]"
            page.fill(area, "alpha beta\ngamma")
            page.eval("(() => { const a = document.getElementById('markdown'); a.setSelectionRange(0, 5); return true; })()")
            page.click("#md-toolbar button[data-md=bold]")
            expect(page.value(area) == "**alpha** beta\ngamma", f"after Bold: {page.value(area)!r}")
            page.eval("(() => { const a = document.getElementById('markdown'); a.setSelectionRange(10, 14); return true; })()")
            page.click("#md-toolbar button[data-md=wikilink]")
            expect(page.value(area) == "**alpha** [[beta]]\ngamma", f"after the wiki link: {page.value(area)!r}")
            page.eval("(() => { const a = document.getElementById('markdown'); a.setSelectionRange(19, 19); return true; })()")
            page.click("#md-toolbar button[data-md=list]")
            expect(page.value(area) == "**alpha** [[beta]]\n- gamma", f"after the list: {page.value(area)!r}")
            page.eval("""(() => { const a = document.getElementById('markdown'); a.setSelectionRange(21, 26);
              a.dispatchEvent(new KeyboardEvent('keydown', { key: 'i', ctrlKey: true, bubbles: true, cancelable: true }));
              return true; })()""")
            expect(page.value(area) == "**alpha** [[beta]]\n- *gamma*", f"after Ctrl+I: {page.value(area)!r}")
            page.wait_for("(() => { const p = document.getElementById('preview');"
                          " return !!p.querySelector('strong') && !!p.querySelector('li em') && !!p.querySelector('a.wikilink'); })()",
                          timeout=15, what="the preview showing the bold text, the list item and the wiki link")
            page.click("#markdown-help > summary")
            page.wait_for("document.getElementById('markdown-help').open", timeout=5, what="the Markdown help open")
            expect("[[Page name]]" in page.text("#markdown-help"), "the help does not show wiki links")
            self.shot("editor-toolbar.png")
            self.audit()
            page.click("button#discard", navigate=True)

        @self.check("times read as people say them: no raw ISO-8601 timestamp is visible text",
                    needs=("alice_again", "home_url"))
        def _():
            for url in (self.ui(""), self.ui("_recent"), st["home_url"], st["home_url"] + "?action=history",
                        st["home_url"] + "?action=blame"):
                self.go(url)
                raw = page.eval("(document.body.innerText.match(/\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d/) || [''])[0]")
                expect(not raw, f"{url} shows the raw timestamp {raw!r}")
                plural = page.eval("(document.body.innerText.match(/\\b1 (pages|members|changes)\\b/) || [''])[0]")
                expect(not plural, f"{url} says {plural!r}")

        # 9. summaries, comparing revisions, files, renaming --------------------------------

        @self.check("an edit summary typed in the editor names the revision in history; the upload is described",
                    needs=("alice_again", "home_url"))
        def _():
            self.go(st["home_url"] + "?action=edit")
            page.wait_for_selector("form#editor input#summary")
            expect(page.exists("label[for=summary]"), "the Summary field has no label")
            text = page.value("form#editor textarea[name=markdown]")
            page.fill("form#editor textarea[name=markdown]", text.rstrip() + "\nA line with a summary.\n")
            page.fill("form#editor input#summary", "added a line about summaries")
            self.publish()
            self.expect_page_view("Home")
            self.follow("a#history")
            summaries = page.texts("ol#history > li.revision .summary")
            expect(summaries and summaries[0] == "added a line about summaries",
                   f"the newest revision's summary: {summaries[:3]}")
            expect("added pixel.png" in summaries, f"the upload's revision is not described: {summaries}")
            self.shot("history-summaries.png")
            st["summarized"] = True

        @self.check("history compares two chosen revisions: inline and side by side, signed + and −",
                    needs=("summarized",))
        def _():
            self.go(st["home_url"] + "?action=history")
            page.wait_for_selector("form#compare-form input[name=from]")
            # The oldest revision against the newest.
            page.eval("(() => { const f = document.querySelectorAll('input[name=from]');"
                      " f[f.length - 1].checked = true; document.querySelector('input[name=to]').checked = true;"
                      " return true; })()")
            self.send("form#compare-form")
            expect(self.query().get("action") == ["compare"], f"expected the comparison, {self.where()}")
            page.wait_for_selector("table#diff.inline")
            signs = page.texts("table#diff td.sign")
            expect("+" in signs and "−" in signs, f"the inline diff's signs: {sorted(set(signs))}")
            expect(page.exists("table#diff ins") and page.exists("table#diff del"), "no ins and del marks")
            self.shot("compare-inline.png")
            self.follow("a#view-side")
            page.wait_for_selector("table#diff.side")
            expect(page.exists("table#diff td.text.ins") and page.exists("table#diff td.text.del"),
                   "the side-by-side diff marks no added and deleted lines")
            self.shot("compare-side.png")

        @self.check("Remove on a page's file asks first, then the file is gone and history says so",
                    needs=("summarized",))
        def _():
            self.go(st["home_url"])
            self.follow(page.mark("section#files a.remove-file", "Remove"))
            page.wait_for_selector("form#file-remove")
            expect("pixel.png" in page.text("h1"), f"the confirmation's heading: {page.text('h1')!r}")
            self.shot("file-remove.png")
            self.send("form#file-remove")
            self.expect_page_view("Home")
            expect(not page.exists("section#files"), "the page still lists files")
            self.follow("a#history")
            summaries = page.texts("ol#history > li.revision .summary")
            expect(summaries and summaries[0] == "removed pixel.png", f"summaries: {summaries[:3]}")

        @self.check("renaming Second Page: the links are offered, the old name redirects with a note, "
                    "the histories link each other", needs=("second_url", "home_url"))
        def _():
            self.go(st["second_url"])
            self.follow("a#rename")
            page.wait_for_selector("form#page-rename")
            page.fill("form#page-rename input#rename-name", "Page Two")
            self.shot("rename.png")
            self.send("form#page-rename")
            page.wait_for_selector("form#relink")
            expect("Home" in " ".join(page.texts("form#relink li label")), "Home is not offered for relinking")
            self.shot("renamed-relink.png")
            self.send("form#relink")
            self.expect_page_view("Page Two")
            st["second_text_now"] = self.content_text()
            expect(st["second_text_now"].strip(), "Page Two has no text")
            self.go(st["home_url"])
            link = page.mark("article#content a.wikilink", "Page Two")
            expect(link, "Home does not link to Page Two")
            self.go(st["second_url"])
            expect(self.path().endswith("/Page Two"), f"the old name did not redirect, {self.where()}")
            page.wait_for_selector("#redirected-from")
            expect("Second Page" in page.text("#redirected-from"), f"note: {page.text('#redirected-from')!r}")
            self.shot("redirected.png")
            self.follow("a#redirect-history")
            page.wait_for_selector("#redirect-to")
            self.go(st["wiki_url"] + quote("Page Two") + "?action=history")
            page.wait_for_selector("#renamed-from a")
            self.shot("history-renamed.png")

        remote = os.environ.get("WIKI_REMOTE_URL")
        if remote:
            remote_user = os.environ.get("WIKI_REMOTE_USER", "")
            remote_password = os.environ.get("WIKI_REMOTE_PASSWORD", "")

            def remote_status(path: str) -> int:
                req = urllib.request.Request(remote + path)
                token = base64.b64encode(f"{remote_user}:{remote_password}".encode()).decode("ascii")
                req.add_header("Authorization", "Basic " + token)
                try:
                    with OPENER.open(req, timeout=5) as resp:
                        return resp.status
                except urllib.error.HTTPError as e:
                    return e.code

            @self.check("setting up sync with a second wikilog in the form: the page says up to date, live",
                        needs=("alice_again",))
            def _():
                self.go(self.ui("_sync"))
                page.fill("form#sync-add input[name=remote]", remote)
                page.fill("form#sync-add input[name=username]", remote_user)
                page.fill("form#sync-add input[name=password]", remote_password)
                page.submit("form#sync-add")
                page.wait_for("(() => { const e = document.querySelector('section.sync [data-field=\"sync-state\"]');"
                              " return !!e && e.textContent === 'up to date'; })()",
                              timeout=30, what="the sync's state 'up to date'")
                expect(page.exists("#sync-indicator"), "no sync indicator in the header")
                expect(remote_password not in page.html(), "the remote's password is shown back")
                self.shot("sync.png")
                st["synced"] = True

            @self.check("the remote goes away: the Sync page and header say offline with the next try; "
                        "an edit made meanwhile arrives when it returns, and the page says up to date",
                        needs=("synced",))
            def _():
                serve = os.environ.get("WIKI_REMOTE_SERVE")
                pid = os.environ.get("WIKI_REMOTE_PID")
                expect(serve and pid, "WIKI_REMOTE_SERVE and WIKI_REMOTE_PID are not set")
                self.go(self.ui("_sync"))
                os.kill(int(pid), signal.SIGTERM)
                # Live: the page's EventSource brings the new state.
                page.wait_for("(() => { const e = document.querySelector('section.sync [data-field=\"sync-state\"]');"
                              " return !!e && e.textContent === 'offline'; })()",
                              timeout=15, what="the sync's state 'offline'")
                status, body = self.api("PUT", self.doc_path("Made Offline"), "alice",
                                        {"type": "page", "wiki_id": st["wiki_id"], "markdown": "while the remote was away"})
                expect(status == 201, f"PUT answered {status}: {body}")
                self.go(self.ui("_sync"))
                expect("Next try" in page.text("section.sync"), f"no next try: {page.text('section.sync')!r}")
                expect(page.text("#sync-indicator") == "Sync: offline", f"header: {page.text('#sync-indicator')!r}")
                self.shot("sync-offline.png")
                self.remote = subprocess.Popen(shlex.split(serve), stdout=subprocess.DEVNULL,
                                               stderr=subprocess.DEVNULL)
                path = "/" + quote(f"{st['wiki_id']}:Made Offline", safe="")
                # Back: Retry now goes at once instead of waiting out the back-off (CouchDB's,
                # 30 s after the first crash).
                deadline = time.time() + 30
                while time.time() < deadline:
                    try:
                        remote_status("")
                        break
                    except OSError:
                        time.sleep(0.1)
                self.go(self.ui("_sync"))
                page.click("section.sync button[value=retry]", navigate=True)
                deadline = time.time() + 20
                while time.time() < deadline:
                    try:
                        if remote_status(path) == 200:
                            break
                    except OSError:
                        pass
                    time.sleep(0.2)
                else:
                    raise CheckFailed(f"{path} did not arrive at {remote} within 20 s of Retry now")
                page.wait_for("(() => { const e = document.querySelector('section.sync [data-field=\"sync-state\"]');"
                              " return !!e && e.textContent === 'up to date'; })()",
                              timeout=30, what="the sync's state 'up to date' again")

            @self.check("a sync with a database that does not exist needs attention and says what to fix; "
                        "Remove asks first", needs=("synced",))
            def _():
                missing = remote.rsplit("/", 1)[0] + "/no-such-db"
                self.go(self.ui("_sync"))
                page.fill("form#sync-add input[name=remote]", missing)
                page.fill("form#sync-add input[name=username]", remote_user)
                page.fill("form#sync-add input[name=password]", remote_password)
                page.submit("form#sync-add")
                page.wait_for("(() => [...document.querySelectorAll('section.sync')].some(s => "
                              f"s.querySelector('h2').textContent.startsWith({json.dumps(missing)}) && "
                              "s.querySelector('[data-field=\"sync-state\"]').textContent === 'needs attention' && "
                              "s.textContent.includes('The remote database does not exist')))()",
                              timeout=30, what="the missing database's sync needing attention, with advice")
                expect(page.text("#sync-indicator") == "Sync: needs attention",
                       f"header: {page.text('#sync-indicator')!r}")
                self.shot("sync-needs-attention.png")
                index = page.eval("[...document.querySelectorAll('section.sync')].findIndex(s => "
                                  f"s.querySelector('h2').textContent.startsWith({json.dumps(missing)}))")
                page.click(f"section.sync:nth-of-type({index + 1}) button[value=remove]", navigate=True)
                page.wait_for_selector("form#sync-remove")
                expect("Nothing is deleted on either side" in page.text("main"),
                       "the confirmation does not say what Remove keeps")
                self.shot("sync-remove.png")
                page.click("form#sync-remove button[type=submit]", navigate=True)
                page.wait_for_selector("#syncs")
                expect(missing not in page.text("#syncs"), "the removed sync is still listed")

            @self.check("a page written here arrives on the other server, its edit summary shown "
                        "in the other server's history", needs=("synced",))
            def _():
                status, body = self.api("PUT", self.doc_path("Synced Page"), "alice",
                                        {"type": "page", "wiki_id": st["wiki_id"], "markdown": "through sync",
                                         "edit_summary": "written on the laptop", "edit_summary_on": ""})
                expect(status == 201, f"PUT answered {status}: {body}")
                path = "/" + quote(f"{st['wiki_id']}:Synced Page", safe="")
                deadline = time.time() + 20
                while remote_status(path) != 200:
                    if time.time() > deadline:
                        raise CheckFailed(f"{path} did not arrive at {remote} in 20 s")
                    time.sleep(0.1)
                # The other server's own UI, signed in there with Basic.
                history = remote.rsplit("/", 1)[0] + "/_wiki/" + quote(st["wiki_id"], safe="") + "/" \
                    + quote("Synced Page") + "?action=history"
                req = urllib.request.Request(history)
                token = base64.b64encode(f"{remote_user}:{remote_password}".encode()).decode("ascii")
                req.add_header("Authorization", "Basic " + token)
                with OPENER.open(req, timeout=10) as resp:
                    html = resp.read().decode("utf-8")
                expect('<span class="summary">written on the laptop</span>' in html,
                       "the other server's history does not show the summary")

        @self.check("alice changes her password in Settings: a wrong current one is refused in the "
                    "frame, the right one changes it, and she signs in with the new one",
                    needs=("alice_again",))
        def _():
            user, old = self.creds["alice"]
            new = old + "-new-" + self.rand
            if not page.exists("form#signout"):
                self.sign_in("alice")
            self.go(self.ui("_settings"))
            page.fill("form#password-form input[name=old_password]", "not-" + old)
            page.fill("form#password-form input[name=new_password]", new)
            page.fill("form#password-form input[name=new_password2]", new)
            self.send("form#password-form")
            expect(page.exists("#settings-error"), f"no #settings-error, {self.where()}")
            self.shot("password-refused.png")
            page.fill("form#password-form input[name=old_password]", old)
            page.fill("form#password-form input[name=new_password]", new)
            page.fill("form#password-form input[name=new_password2]", new)
            self.send("form#password-form")
            expect(page.exists("#settings-saved"), f"no #settings-saved, {self.where()}")
            self.creds["alice"] = (user, new)
            self.sign_out()
            self.sign_in("alice")

        @self.check("the keyboard's first Tab lands on a visible 'Skip to content' link with a focus ring; "
                    "it moves the focus to the main content", needs=("home_url",))
        def _():
            self.go(st["home_url"])
            for kind in ("keyDown", "keyUp"):
                page.send("Input.dispatchKeyEvent", {"type": kind, "key": "Tab", "code": "Tab",
                                                     "windowsVirtualKeyCode": 9})
            probe = page.eval("(() => { const a = document.activeElement, r = a.getBoundingClientRect(), "
                              "s = getComputedStyle(a); return {cls: a.className, href: a.getAttribute('href'), "
                              "top: r.top, height: r.height, outline: s.outlineStyle, "
                              "ring: a.matches(':focus-visible')}; })()")
            expect(probe["cls"] == "skip" and probe["href"] == "#main", f"the first Tab focused {probe}")
            expect(probe["top"] >= 0 and probe["height"] > 0, f"the skip link is not in view: {probe}")
            expect(probe["ring"] and probe["outline"] != "none", f"no focus ring on the skip link: {probe}")
            page.screenshot(os.path.join(self.outdir, "skip-link.png"), full_page=False)
            for kind in ("keyDown", "keyUp"):
                page.send("Input.dispatchKeyEvent", {"type": kind, "key": "Enter", "code": "Enter",
                                                     "windowsVirtualKeyCode": 13})
            page.wait_for("document.activeElement && document.activeElement.id === 'main'",
                          what="the focus on main#main")

        @self.check("keyboard paths: '/' focuses the search box and Enter searches; 'e' opens the editor "
                    "of the page shown; Ctrl+S publishes", needs=("home_url",))
        def _():
            def key(key: str, code: str, vk: int, text: str | None = None, modifiers: int = 0) -> None:
                down = {"type": "keyDown", "key": key, "code": code, "windowsVirtualKeyCode": vk,
                        "modifiers": modifiers}
                if text is not None:
                    down["text"] = text
                page.send("Input.dispatchKeyEvent", down)
                page.send("Input.dispatchKeyEvent", {"type": "keyUp", "key": key, "code": code,
                                                     "windowsVirtualKeyCode": vk, "modifiers": modifiers})
            self.go(st["home_url"])
            key("/", "Slash", 191)
            page.wait_for("document.activeElement && document.activeElement.name === 'q'",
                          what="the focus in the search box")
            expect(page.value("form#search input[name=q]") == "", "the '/' was typed into the box")
            page.send("Input.insertText", {"text": "Home"})
            page.expect_navigation(lambda: key("Enter", "Enter", 13, text="\r"), what="the search")
            page.wait_for_selector("ol#results li.hit")
            self.go(st["home_url"])
            page.expect_navigation(lambda: key("e", "KeyE", 69), what="the editor")
            self.expect_editor("Home")
            page.eval("document.querySelector('form#editor textarea[name=markdown]').focus()")
            page.eval("(() => { const t = document.querySelector('form#editor textarea[name=markdown]'); "
                      "t.selectionStart = t.selectionEnd = t.value.length; })()")
            page.send("Input.insertText", {"text": "\nTyped and published from the keyboard."})
            page.expect_navigation(lambda: key("s", "KeyS", 83, modifiers=2), what="the publish")
            page.wait_for_selector("article#content")
            expect("Typed and published from the keyboard." in self.content_text(),
                   f"not published: {self.content_text()[-200:]!r}")

        @self.check("dark (prefers-color-scheme: dark): a page, the editor, a compare, recent changes "
                    "and a history with a deletion in the dark palette", needs=("home_url",))
        def _():
            self.go(st["home_url"])
            light = page.eval("getComputedStyle(document.body).backgroundColor")
            page.send("Emulation.setEmulatedMedia",
                      {"features": [{"name": "prefers-color-scheme", "value": "dark"}]})
            try:
                self.go(st["home_url"])
                dark = page.eval("getComputedStyle(document.body).backgroundColor")
                expect(dark != light, f"the background stays {light} in the dark")
                self.shot("page-dark.png")
                self.go(st["home_url"] + "?action=edit")
                page.wait_for_selector("form#editor textarea[name=markdown]")
                self.shot("edit-dark.png")
                self.go(st["home_url"] + "?action=history")
                if page.exists("a.diff-link"):
                    self.follow("a.diff-link")
                    page.wait_for_selector("table.diff-table")
                    self.shot("compare-dark.png")
                # Red marks: recent changes (deleted pages), a history with its deletion.
                self.go(self.ui("_recent"))
                self.shot("recent-dark.png")
                if st.get("scratch_url"):
                    self.go(st["scratch_url"] + "?action=history")
                    self.shot("history-deleted-dark.png")
            finally:
                page.send("Emulation.setEmulatedMedia", {"features": []})

        @self.check("390 px wide: a page and the Sync page fit, no sideways scroll", needs=("home_url",))
        def _():
            self.narrow()
            try:
                for url, name in ((st["home_url"], "page-390.png"), (self.ui("_sync"), "sync-390.png"),
                                  (st["home_url"] + "?action=edit", "edit-390.png")):
                    page.goto(url)
                    width = page.eval("document.documentElement.scrollWidth")
                    expect(width <= 390, f"{urlsplit(url).path} is {width} px wide at 390 px")
                    self.shot(name)
            finally:
                self.wide()

        @self.check("the administrator's Users page lists the users, each but themselves with Remove "
                    "(asked first); Settings links it")
        def _():
            self.sign_out()
            self.sign_in("admin")
            self.go(self.ui("_settings"))
            self.follow("a#manage-users")
            page.wait_for_selector("table#users")
            names = page.texts("table#users td.name")
            expect(any(alice in n for n in names) and any(carol in n for n in names), f"users: {names}")
            self.shot("users.png")
            self.send(f"form.remove-user button[aria-label='Remove {carol}']")
            page.wait_for_selector("form#user-remove")
            self.shot("user-remove.png")
            self.follow("form#user-remove a")
            page.wait_for_selector("table#users")

        @self.check("an administrator disables a user: the row says so, their sign-in says the account "
                    "is disabled; Enable lets them in again")
        def _():
            self.go(self.ui("_users"))
            self.send(f"form.disable-user button[aria-label='Disable {carol}']")
            page.wait_for_selector("#users-saved")
            expect(f"{carol} is disabled" in page.text("#users-saved"), page.text("#users-saved"))
            expect(page.texts("table#users tr.disabled-user td.name") == [carol],
                   f"disabled rows: {page.texts('table#users tr.disabled-user td.name')}")
            self.shot("users-disabled.png")
            status, answer = self.api("GET", "/_session", "carol")
            expect(status == 401 and "disabled" in answer.get("reason", ""), f"carol's sign-in: {status} {answer}")
            self.send(f"form.enable-user button[aria-label='Enable {carol}']")
            page.wait_for_selector("#users-saved")
            expect(not page.texts("table#users tr.disabled-user td.name"), "still disabled")
            status, answer = self.api("GET", "/_session", "carol")
            expect(status == 200, f"carol's sign-in after Enable: {status} {answer}")

        @self.check("an administrator makes an invitation link; opened signed out, it fills in its code, "
                    "makes the account and signs it in; the same link then makes nothing")
        def _():
            self.go(self.ui("_users"))
            page.wait_for_selector("form#invite-form")
            self.send("form#invite-form")
            page.wait_for_selector("#invitation-link")
            link = page.text("#invitation-link").strip()
            expect("/_wiki/_invite#wli_" in link, f"the link: {link!r}")
            self.shot("users-invitation.png")
            self.sign_out()
            newcomer = "newcomer-" + slug(link[-6:])
            self.go(link)
            page.wait_for_selector("form#invite")
            code = page.value("#invite-code")
            expect(code == link.split("#", 1)[1], f"the code field holds {code!r}")
            expect("#" not in page.eval("location.href"), "the code stays in the address bar")
            page.fill("form#invite input[name=name]", newcomer)
            page.fill("form#invite input[name=password]", "a-good-password")
            page.fill("form#invite input[name=password2]", "a-good-password")
            self.shot("invite.png")
            self.send("form#invite")
            expect(self.path() == "/_wiki/", f"after making the account, {self.where()}")
            expect(word_re(newcomer).search(page.text("#user")), f"#user shows {page.text('#user')!r}")
            self.sign_out()
            self.go(link)
            page.wait_for_selector("form#invite")
            page.fill("form#invite input[name=name]", newcomer + "-again")
            page.fill("form#invite input[name=password]", "a-good-password")
            page.fill("form#invite input[name=password2]", "a-good-password")
            self.send("form#invite")
            expect(page.exists("#invite-error") and "not valid any more" in page.text("#invite-error"),
                   f"a used link: {self.where()}")
            self.sign_in("admin")

        @self.check("every POST form carries a hidden, non-empty input[name=csrf]")
        def _():
            expect(not self.csrf_violations, "; ".join(self.csrf_violations[:8]))

        @self.check("every page of the app visited: each control named, one h1, img alt, html lang, "
                    "the skip link first, no sideways scroll at 390 px")
        def _():
            expect(self.a11y_pages > 10, f"only {self.a11y_pages} pages audited")
            expect(not self.a11y_violations, f"{len(self.a11y_violations)} pages: " +
                   "; ".join(self.a11y_violations[:12]))


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(f"usage: {os.path.basename(argv[0])} BASE OUTDIR   (e.g. http://127.0.0.1:5984 /tmp/shots)",
              file=sys.stderr)
        return 2
    base, outdir = argv[1], argv[2]
    os.makedirs(outdir, exist_ok=True)
    names = {"admin": ("WIKI_ADMIN", "WIKI_ADMIN_PASSWORD"), "alice": ("WIKI_USER1", "WIKI_USER1_PASSWORD"),
             "carol": ("WIKI_USER2", "WIKI_USER2_PASSWORD")}
    missing = [v for pair in names.values() for v in pair if not os.environ.get(v)]
    if missing:
        print(f"FAIL - environment: set {', '.join(missing)}", flush=True)
        print("0 passed, 1 failed", flush=True)
        return 1
    creds = {who: (os.environ[u], os.environ[p]) for who, (u, p) in names.items()}
    scenario = Scenario(base, outdir, creds)
    host = urlsplit(base).hostname or ""
    browser = None
    try:
        browser = Browser(isolate_network=host in ("127.0.0.1", "localhost", "::1"))
        browser.start()
        scenario.page = browser.new_page(new_context=True)
        timeout = float(os.environ.get("E2E_TIMEOUT", "10"))
        scenario.page.default_timeout = timeout
        scenario.page.navigation_timeout = max(20.0, 2 * timeout)
        scenario.run()
    except Exception as e:  # noqa: BLE001 - the browser itself failed
        scenario.failed += 1
        why = re.sub(r"\s+", " ", str(e))[:500]
        print(f"FAIL - browser: {type(e).__name__}: {why}", flush=True)
    finally:
        remote = getattr(scenario, "remote", None)
        if remote is not None:
            remote.terminate()
            try:
                remote.wait(timeout=10)
            except subprocess.TimeoutExpired:
                remote.kill()
        if scenario.page is not None:
            try:
                with open(os.path.join(outdir, "console.log"), "w", encoding="utf-8") as f:
                    f.write("\n".join(scenario.page.console) + "\n")
            except OSError:
                pass
        if browser is not None:
            browser.close()
    print(f"{scenario.passed} passed, {scenario.failed} failed", flush=True)
    return 0 if scenario.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
