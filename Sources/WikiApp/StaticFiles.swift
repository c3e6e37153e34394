/// The UI's one stylesheet and one small script, compiled into the binary and served at
/// `/_wiki/_static/`. The pages work without the script; it adds the draft autosave, the
/// live preview, live recent changes and keyboard shortcuts.
enum StaticFiles {
  static let files: [String: (type: String, text: String)] = [
    "app.css": ("text/css; charset=utf-8", css),
    "app.js": ("text/javascript; charset=utf-8", js),
  ]

  static let css = """
    :root { --ink: #1d232a; --muted: #5d6873; --line: #d8dee4; --accent: #0b63c5; --warn: #fff4d6;
      --bg: #fbfcfd; --missing: #c0392b; --surface: #fff; --code-bg: #f3f5f7; --info-bg: #eaf2fc;
      --info-line: #c9ddf5; --warn-line: #efd38a; --mark: #fff1a8; --danger: #a4262c; --on-accent: #fff;
      --focus: #0b63c5; color-scheme: light dark;
      font-family: system-ui, -apple-system, "Segoe UI", "DejaVu Sans", sans-serif; }
    /* Dark: the same custom properties, another palette (each text colour keeps at least
       4.5:1 on its background). */
    @media (prefers-color-scheme: dark) {
      :root { --ink: #e3e7eb; --muted: #a5afb9; --line: #3b444e; --accent: #78b6ff; --warn: #3a3016;
        --bg: #121619; --missing: #ff8a80; --surface: #1b2127; --code-bg: #232a31; --info-bg: #15263a;
        --info-line: #2b4a6e; --warn-line: #7c6424; --mark: #5c4d0c; --danger: #c2414a; --on-accent: #0a1a2c;
        --focus: #9ccaff; }
    }
    * { box-sizing: border-box; }
    body { margin: 0; color: var(--ink); background: var(--bg); line-height: 1.55; }
    a { color: var(--accent); text-decoration: none; }
    a:hover { text-decoration: underline; }
    :focus-visible { outline: 3px solid var(--focus); outline-offset: 2px; }
    main:focus { outline: none; }
    a.skip { position: absolute; left: .5rem; top: -10rem; z-index: 10; padding: .5rem .9rem; background: var(--surface);
      color: var(--accent); border: 2px solid var(--focus); border-radius: 6px; font-weight: 600; }
    a.skip:focus { top: .5rem; }
    header.top { display: flex; gap: 1.5rem; align-items: center; padding: .6rem 1.2rem;
      background: var(--surface); border-bottom: 1px solid var(--line); flex-wrap: wrap; }
    header.top .brand { font-weight: 700; color: var(--ink); font-size: 1.15rem; }
    header.top nav { display: flex; flex-wrap: wrap; gap: .2rem 1rem; flex: 1; }
    header.top .who { display: flex; gap: .6rem; align-items: center; color: var(--muted); }
    header.top form { display: inline; margin: 0; }
    main { max-width: 68rem; margin: 0 auto; padding: 1.2rem; }
    h1 { font-size: 1.7rem; margin: .4rem 0 .8rem; }
    p.page-title { margin: .4rem 0 .5rem; color: var(--muted); font-weight: 600; }
    h1, h2, .crumbs, #pages a, .page, td, li { overflow-wrap: anywhere; }
    .conflicts .hunk { border: 1px solid var(--warn-line); background: var(--warn); border-radius: 6px; padding: .4rem .6rem; margin: .6rem 0; }
    .hunk-title { margin: 0 0 .3rem; font-weight: 600; }
    .hunk-sides { display: flex; gap: .6rem; flex-wrap: wrap; }
    .hunk-side { flex: 1 1 12rem; min-width: 0; background: var(--surface); border: 1px solid var(--line); border-radius: 4px; padding: .3rem .5rem; }
    .hunk-side p { margin: 0; }
    .hunk-side pre { white-space: pre-wrap; margin: .3rem 0; }
    dialog#signin-dialog { color: var(--ink); background: var(--surface); border: 1px solid var(--line); border-radius: 8px; max-width: 24rem; }
    dialog#signin-dialog label { display: block; margin: .4rem 0; }
    dialog#signin-dialog input { width: 100%; }
    h2 { font-size: 1.15rem; margin-top: 1.6rem; }
    .meta, .crumbs { color: var(--muted); font-size: .92rem; }
    .attach { margin-top: 1.2rem; padding: .6rem 1rem; border: 2px dashed var(--line); border-radius: 8px; }
    .attach.dropping { border-color: var(--accent); background: var(--info-bg); }
    .file-pick input { margin-left: .4rem; }
    label.file-pick { display: inline; }
    input[type=file] { border: 0; padding: 0; background: none; }
    ul.files { padding-left: 1.2rem; }
    .markdown img { max-width: 100%; }
    .markdown > :first-child { margin-top: 0; }
    header.top form.search { margin-left: auto; margin-right: .8rem; }
    header.top form.search input { padding: .3rem .6rem; border: 1px solid var(--line); border-radius: 6px; width: 14rem; max-width: 40vw; }
    .search-page input[type=search] { padding: .4rem .6rem; width: 24rem; max-width: 70vw; }
    ol#results { padding-left: 1.4rem; }
    li.hit { margin: .8rem 0; }
    li.hit .title { font-weight: 600; }
    .snippet { margin: .2rem 0; }
    mark { background: var(--mark); color: var(--ink); padding: 0 .1rem; }
    .sync-indicator { font-size: .88rem; padding: .15rem .5rem; border-radius: 999px; border: 1px solid var(--line); text-decoration: none; }
    .sync-offline, .sync-failed, .sync-needs-attention, .sync-not-all-sent, .sync-not-all-received { background: var(--warn); }
    .sync-advice { display: block; font-weight: 600; }
    .sync-advice:empty { display: none; }
    .sync-credentials { margin: 0 0 1.2rem; }
    .sync-state { font-size: .9rem; font-weight: normal; color: var(--muted); }
    .sync-directions { border-collapse: collapse; width: 100%; margin: .4rem 0; }
    .sync-directions th, .sync-directions td { text-align: left; padding: .25rem .5rem; border-bottom: 1px solid var(--line); font-size: .92rem; }
    .sync-actions { margin: .4rem 0 1.2rem; }
    form.stacked label { display: block; margin: .4rem 0; }
    form.stacked input { display: block; width: 100%; max-width: 32rem; }
    .bar { padding: .6rem 1rem; background: var(--info-bg); border: 1px solid var(--info-line); border-radius: 6px; margin: .8rem auto; max-width: 68rem; }
    .bar.warn { background: var(--warn); border-color: var(--warn-line); }
    .bar form { display: inline; }
    .error { color: var(--missing); }
    .empty { color: var(--muted); }
    ul.cards { list-style: none; padding: 0; display: grid; gap: .6rem; }
    ul.cards li { background: var(--surface); border: 1px solid var(--line); border-radius: 8px; padding: .7rem 1rem; }
    ul.cards .wiki { font-weight: 600; font-size: 1.08rem; display: block; }
    form { margin: 1rem 0; }
    label { display: block; margin: .4rem 0; }
    input, textarea, button { font: inherit; }
    input, textarea, select { padding: .4rem .5rem; border: 1px solid var(--line); border-radius: 5px; background: var(--surface); color: var(--ink); max-width: 100%; }
    textarea { width: 100%; font-family: "DejaVu Sans Mono", ui-monospace, monospace; font-size: .92rem; }
    button { padding: .4rem .9rem; border: 1px solid var(--accent); background: var(--accent); color: var(--on-accent); border-radius: 5px; cursor: pointer; }
    button#discard, header.top button, form.discard-draft button { background: var(--surface); color: var(--accent); }
    button.danger { background: var(--danger); border-color: var(--danger); color: #fff; }
    #sync-remove a, form.confirm a { margin-left: .8rem; }
    .deleted-mark, strong.deleted { color: var(--missing); }
    li.deleted > a { text-decoration: line-through; }
    .asof-links { font-size: .92rem; }
    form.watch { display: inline; margin: 0 0 0 .5rem; }
    form.revoke-invitation { display: inline; margin-left: .4rem; }
    form.revoke-invitation button, form.watch button, form#mark-seen button { padding: .1rem .6rem; font-size: .9rem; background: var(--surface); color: var(--accent); }
    .edit-links { font-size: .9rem; white-space: nowrap; }
    ol#recent li, ol#watch-changes li { margin: .25rem 0; }
    table.users { border-collapse: collapse; width: 100%; }
    table.users th, table.users td { text-align: left; padding: .3rem .6rem; border-bottom: 1px solid var(--line); }
    form.remove-user, form.disable-user, form.enable-user { margin: 0; display: inline; }
    table.users td.user-actions { white-space: nowrap; }
    table.users tr.disabled-user td.name { color: var(--muted); text-decoration: line-through; }
    code.token { overflow-wrap: anywhere; background: var(--code-bg); padding: .1rem .3rem; border-radius: 4px; }
    form.discard-draft { display: inline; margin-left: .6rem; }
    form.discard-draft button { padding: .15rem .6rem; font-size: .92rem; }
    .columns { display: grid; grid-template-columns: 1fr 1fr; gap: 1.5rem; }
    .narrow { max-width: 24rem; margin: 3rem auto; }
    .markdown { min-width: 0; background: var(--surface); border: 1px solid var(--line); border-radius: 8px; padding: 1rem 1.3rem; overflow-wrap: anywhere; }
    .markdown table { border-collapse: collapse; display: block; max-width: 100%; overflow-x: auto; }
    .markdown th, .markdown td { border: 1px solid var(--line); padding: .3rem .6rem; }
    .markdown pre, pre { background: var(--code-bg); padding: .7rem; border-radius: 6px; overflow-x: auto; }
    a.missing-page { color: var(--missing); border-bottom: 1px dashed var(--missing); }
    .editor-panes { display: grid; grid-template-columns: 1fr 1fr; gap: 1rem; }
    .editor-panes > * { min-width: 0; }
    .editor-bar { display: flex; gap: .8rem; align-items: center; }
    .md-toolbar { display: flex; flex-wrap: wrap; gap: .3rem; margin-bottom: .35rem; }
    .md-toolbar button { padding: .15rem .55rem; font-size: .9rem; background: var(--surface); color: var(--accent); }
    .md-toolbar button code { background: none; padding: 0; }
    .md-help { margin-top: .4rem; font-size: .92rem; }
    .md-help table { border-collapse: collapse; margin-top: .3rem; }
    .md-help td, .md-help th { border: 1px solid var(--line); padding: .2rem .45rem; text-align: left; vertical-align: top; }
    #draft-status { flex: 1; color: var(--muted); }
    pre.diff { white-space: pre-wrap; }
    ol#history li { margin-bottom: 1rem; }
    table#blame { border-collapse: collapse; width: 100%; font-size: .9rem; }
    table#blame td, table#blame th { border-bottom: 1px solid var(--line); padding: .15rem .5rem; text-align: left; vertical-align: top; }
    table#blame td.text code { white-space: pre-wrap; }
    .visually-hidden { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; }
    .edit-summary { display: flex; gap: .5rem; align-items: center; flex-wrap: wrap; margin: .6rem 0 0; }
    .edit-summary input { flex: 1 1 20rem; min-width: 0; }
    .summary { font-style: italic; }
    .rev.meta { font-size: .8rem; font-family: ui-monospace, monospace; }
    ol#history { padding-left: 1.2rem; }
    .pick input { margin: 0 .15rem; }
    .compare-bar { margin: .3rem 0 .8rem; }
    .file-actions { margin-left: .5rem; font-size: .9rem; }
    .replace-file { display: inline; color: var(--accent); cursor: pointer; position: relative; }
    .replace-file input { position: absolute; width: 1px; height: 1px; opacity: 0; }
    .replace-file:focus-within { outline: 2px solid var(--accent); }
    /* Diffs: translucent tints read on light and dark backgrounds; the signs and ins/del
       marks say it without colour. */
    :root { --diff-ins: rgba(46, 160, 67, .16); --diff-del: rgba(248, 81, 73, .16);
      --diff-ins-word: rgba(46, 160, 67, .42); --diff-del-word: rgba(248, 81, 73, .42); }
    .compare-heads { display: grid; grid-template-columns: 1fr 1fr; gap: .6rem; }
    .compare-head { margin: 0; padding: .4rem .6rem; border-radius: 6px; border: 1px solid var(--line); }
    .del-head { background: var(--diff-del); } .ins-head { background: var(--diff-ins); }
    .compare-head .sign { font-weight: 700; font-family: ui-monospace, monospace; }
    table.diff-table { border-collapse: collapse; width: 100%; font-size: .88rem; table-layout: fixed; margin-top: .6rem; border: 1px solid var(--line); }
    table.diff-table th { text-align: left; font-weight: 600; padding: .2rem .4rem; border-bottom: 1px solid var(--line); }
    table.diff-table td { padding: .05rem .4rem; vertical-align: top; }
    table.diff-table code { white-space: pre-wrap; overflow-wrap: anywhere; background: none; padding: 0; }
    table.diff-table .num { width: 3.2rem; text-align: right; color: var(--muted); font-family: ui-monospace, monospace; }
    table.diff-table .sign { width: 1.4rem; text-align: center; font-weight: 700; font-family: ui-monospace, monospace; }
    table.diff-table col.c-num { width: 3.2rem; } table.diff-table col.c-sign { width: 1.6rem; }
    table.diff-table tr.ins td, table.diff-table td.ins { background: var(--diff-ins); }
    table.diff-table tr.del td, table.diff-table td.del { background: var(--diff-del); }
    table.diff-table ins, table.diff-table del { text-decoration: none; }
    table.diff-table ins.word { background: var(--diff-ins-word); text-decoration: underline; border-radius: 2px; }
    table.diff-table del.word { background: var(--diff-del-word); text-decoration: line-through; border-radius: 2px; }
    table.diff-table tr.gap td { text-align: center; color: var(--muted); background: rgba(127, 127, 127, .1); }
    table.diff-table td.empty { background: rgba(127, 127, 127, .08); }
    ul.relink-pages { list-style: none; padding-left: 0; }
    ul.relink-pages label { display: inline; }
    #page-rename select { display: block; padding: .4rem .5rem; border: 1px solid var(--line); border-radius: 5px; background: var(--surface); font: inherit; min-width: min(16rem, 100%); }
    .confirm a, #page-rename a, #relink a#skip-relink { margin-left: .6rem; }
    fieldset { border: 1px solid var(--line); border-radius: 6px; }
    .leaves { display: grid; grid-template-columns: repeat(auto-fit, minmax(18rem, 1fr)); gap: 1rem; }
    .leaf { background: var(--surface); border: 1px solid var(--line); border-radius: 8px; padding: .7rem; }
    .actions { float: right; }
    @media (max-width: 760px) {
      .columns, .editor-panes { grid-template-columns: 1fr; }
      .actions { float: none; }
      main { padding: .7rem; }
      .compare-heads { grid-template-columns: 1fr; }
    }
    /* A tables' box scrolls sideways on its own when the table is wider than the screen. */
    .table-scroll { max-width: 100%; overflow-x: auto; }
    main { overflow-wrap: break-word; }
    /* Phones: the header wraps in a few short rows; the search takes a row of its own. */
    @media (max-width: 600px) {
      header.top { gap: .35rem .9rem; padding: .45rem .6rem; }
      header.top .brand { order: 1; }
      header.top .who { order: 2; margin-left: auto; gap: .45rem; font-size: .92rem; }
      header.top nav { order: 3; flex: 1 1 100%; flex-wrap: wrap; gap: .15rem .55rem; font-size: .88rem; }
      header.top form.search { order: 4; flex: 1 1 100%; margin: 0; }
      header.top form.search input { width: 100%; max-width: none; padding: .25rem .5rem; }
      header.top button { padding: .2rem .6rem; }
      .search-page input[type=search] { width: 100%; max-width: none; }
      textarea#markdown { height: 45vh; min-height: 12rem; }
      h1 { font-size: 1.4rem; }
      .markdown { padding: .7rem .8rem; }
      .bar { margin: .5rem .7rem; }
    }
    """

  static let js = """
    (function () {
      "use strict";
      var csrf = document.body.getAttribute("data-csrf") || "";
      // Times for people: relative to now, in the viewer's time zone; the exact local time as
      // the title. (The server writes them in UTC, for a page without this script.)
      function plural(n, word) { return n + " " + word + (n === 1 ? "" : "s"); }
      function readable(el) {
        var d = new Date(el.getAttribute("datetime"));
        if (isNaN(d.getTime())) { return; }
        var now = new Date(), diff = (now - d) / 1000;
        var hm = d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
        var text;
        if (diff < 0 && diff > -3600) {
          text = diff > -60 ? "in " + plural(Math.ceil(-diff), "second") : "in " + plural(Math.round(-diff / 60), "minute");
        } else if (diff >= 0 && diff < 45) {
          text = "just now";
        } else if (diff >= 45 && diff < 3600) {
          text = plural(Math.max(1, Math.round(diff / 60)), "minute") + " ago";
        } else if (diff >= 3600 && diff < 6 * 3600) {
          text = plural(Math.round(diff / 3600), "hour") + " ago";
        } else {
          var day = new Date(d.getFullYear(), d.getMonth(), d.getDate());
          var today = new Date(now.getFullYear(), now.getMonth(), now.getDate());
          var days = Math.round((today - day) / 86400000);
          if (days === 0) { text = "today at " + hm; }
          else if (days === 1) { text = "yesterday at " + hm; }
          else if (days === -1) { text = "tomorrow at " + hm; }
          else {
            var options = { day: "numeric", month: "short" };
            if (d.getFullYear() !== now.getFullYear()) { options.year = "numeric"; }
            text = d.toLocaleDateString([], options) + " at " + hm;
          }
        }
        el.textContent = text;
        el.title = d.toLocaleString();
      }
      function timeElement(iso) {
        var t = document.createElement("time");
        t.setAttribute("datetime", iso);
        t.textContent = iso;
        readable(t);
        return t;
      }
      // A time marked exact (the as-of bar's moment, a deletion's) stays as the server wrote it.
      function readableAll() { Array.prototype.forEach.call(document.querySelectorAll("time[datetime]:not(.exact)"), readable); }
      readableAll();
      setInterval(readableAll, 30000);
      function post(url, fields) {
        var body = new URLSearchParams(fields);
        body.set("csrf", csrf);
        return fetch(url, { method: "POST", body: body, credentials: "same-origin",
          headers: { "Content-Type": "application/x-www-form-urlencoded", "X-Wikilog-Script": "1" } });
      }
      // Signing in again in place, when the session ends while a page is open: a dialog of its
      // own (outside every other form), CouchDB's POST /_session, then what was waiting.
      var afterSignIn = [];
      function signInAgain(then) {
        if (then) { afterSignIn.push(then); }
        var dialog = document.getElementById("signin-dialog");
        if (!dialog) {
          dialog = document.createElement("dialog");
          dialog.id = "signin-dialog";
          dialog.setAttribute("aria-labelledby", "signin-dialog-title");
          dialog.innerHTML = '<form method="dialog" id="signin-again">' +
            '<h2 id="signin-dialog-title">Sign in again</h2>' +
            '<p>Your session has ended. What you typed is kept; sign in to save it.</p>' +
            '<p class="error" id="signin-error" role="alert"></p>' +
            '<label>Name <input name="name" autocomplete="username" required></label>' +
            '<label>Password <input name="password" type="password" autocomplete="current-password" required></label>' +
            '<p><button type="submit">Sign in</button></p></form>';
          document.body.appendChild(dialog);
          dialog.querySelector("form").addEventListener("submit", function (e) {
            e.preventDefault();
            var form = e.target;
            fetch("/_session", { method: "POST", credentials: "same-origin",
                headers: { "Content-Type": "application/json", "Accept": "application/json" },
                body: JSON.stringify({ name: form.name.value, password: form.password.value }) })
              .then(function (r) {
                if (!r.ok) { throw new Error("That name and password did not work; try again."); }
                form.password.value = "";
                dialog.close();
                var waiting = afterSignIn.splice(0);
                waiting.forEach(function (f) { f(); });
              })
              .catch(function (err) { document.getElementById("signin-error").textContent = err.message; });
          });
        }
        if (!dialog.open) { dialog.showModal(); }
      }
      // What a refused request said, for the status line.
      function reasonOf(r) {
        return r.json().then(function (j) { return j.reason || j.error || ("the server answered " + r.status); },
          function () { return "the server answered " + r.status; });
      }
      // An invitation link's code comes after "#" (never sent to the server): into the form.
      var inviteCode = document.getElementById("invite-code");
      if (inviteCode && !inviteCode.value && location.hash.indexOf("#wli_") === 0) {
        inviteCode.value = decodeURIComponent(location.hash.slice(1));
        history.replaceState(null, "", location.pathname);
      }
      // The editor: live preview and a draft autosaved two seconds after the last keystroke.
      // The browser keeps what is typed (localStorage) until the server has it: a lost session,
      // a failed save or a closed tab loses nothing.
      var editor = document.getElementById("editor");
      if (editor) {
        var area = document.getElementById("markdown");
        var status = document.getElementById("draft-status");
        var preview = document.getElementById("preview");
        var base = editor.querySelector("input[name=base]");
        var timer = null, previewTimer = null, dirty = false;
        var keptKey = "wikilog-unsaved:" + editor.getAttribute("action");
        function keep(submitted) {
          try { localStorage.setItem(keptKey, JSON.stringify({ text: area.value, base: base.value, at: Date.now(), submitted: !!submitted })); } catch (e) {}
        }
        function kept() {
          try { return JSON.parse(localStorage.getItem(keptKey) || "null"); } catch (e) { return null; }
        }
        function forget(text) {
          var k = kept();
          if (k && k.text === text) { try { localStorage.removeItem(keptKey); } catch (e) {} }
        }
        function hasMarkers(text) { return /^(<<<<<<<|>>>>>>>|[|]{7}|=======$)/m.test(text); }
        function autosave() {
          timer = null;
          var text = area.value;
          post(editor.getAttribute("data-autosave"), { markdown: text, base: base.value, summary: summaryField ? summaryField.value : "" })
            .then(function (r) {
              if (r.status === 401) { signInAgain(autosave); throw null; }
              var type = r.headers.get("Content-Type") || "";
              if (!r.ok || type.indexOf("application/json") !== 0) {
                return reasonOf(r).then(function (why) { throw new Error(why); });
              }
              return r.json();
            })
            .then(function (j) {
              if (area.value === text) { dirty = false; }
              forget(text);
              status.textContent = "Draft saved ";
              status.appendChild(timeElement(j.saved_at));
              status.appendChild(document.createTextNode(" (not published yet)."));
            })
            .catch(function (e) {
              if (e === null) { status.textContent = "Your session has ended: sign in to save. Your text is kept in this browser."; return; }
              status.textContent = "Could not save the draft (" + (e && e.message ? e.message : e) +
                "). Your text is kept in this browser; trying again in 15 seconds.";
              if (!timer) { timer = setTimeout(autosave, 15000); }
            });
        }
        function refreshPreview() {
          previewTimer = null;
          post(editor.getAttribute("data-preview"), { markdown: area.value })
            .then(function (r) {
              if (r.status === 401) { signInAgain(refreshPreview); return null; }
              var type = r.headers.get("Content-Type") || "";
              if (!r.ok || r.redirected || type.indexOf("text/html") !== 0) { return null; }
              return r.text();
            })
            .then(function (html) { if (html !== null) { preview.innerHTML = html; } })
            .catch(function () {});
        }
        function changed() {
          dirty = true;
          keep();
          status.textContent = "Typing…";
          if (timer) { clearTimeout(timer); }
          timer = setTimeout(autosave, 2000);
          if (previewTimer) { clearTimeout(previewTimer); }
          previewTimer = setTimeout(refreshPreview, 400);
        }
        area.addEventListener("input", changed);
        // The toolbar: wraps the selection (or a placeholder, selected) in the Markdown asked
        // for, or starts each selected line with it; Ctrl+B and Ctrl+I in the text too.
        function format(kind) {
          var start = area.selectionStart, end = area.selectionEnd, text = area.value;
          var chosen = text.slice(start, end);
          var wraps = { bold: ["**", "**", "bold text"], italic: ["*", "*", "italic text"],
            code: ["`", "`", "code"], wikilink: ["[[", "]]", "Page name"], link: ["[", "](https://)", "link text"] };
          var prefixes = { heading: "## ", list: "- ", quote: "> " };
          var replaced, selectFrom, selectTo;
          if (wraps[kind]) {
            var w = wraps[kind], inner = chosen || w[2];
            replaced = w[0] + inner + w[1];
            selectFrom = start + w[0].length;
            selectTo = selectFrom + inner.length;
          } else if (prefixes[kind]) {
            var lineStart = text.lastIndexOf("\\n", start - 1) + 1;
            chosen = text.slice(lineStart, end);
            start = lineStart;
            replaced = chosen.split("\\n").map(function (line) { return prefixes[kind] + line; }).join("\\n");
            selectFrom = start;
            selectTo = start + replaced.length;
          } else { return; }
          area.focus();
          area.setRangeText(replaced, start, end, "end");
          area.setSelectionRange(selectFrom, selectTo);
          changed();
        }
        var toolbar = document.getElementById("md-toolbar");
        if (toolbar) {
          toolbar.addEventListener("click", function (e) {
            var button = e.target.closest && e.target.closest("button[data-md]");
            if (button) { format(button.getAttribute("data-md")); }
          });
        }
        area.addEventListener("keydown", function (e) {
          if (!(e.ctrlKey || e.metaKey) || e.altKey) { return; }
          var key = e.key.toLowerCase();
          if (key === "b" || key === "i") { e.preventDefault(); format(key === "b" ? "bold" : "italic"); }
        });
        var summaryField = document.getElementById("summary");
        if (summaryField) { summaryField.addEventListener("input", changed); }
        // A text this browser kept that the server does not have: put back, and saved.
        var saved = kept();
        // (One sent with the form reached the server, which answered this page: not put back.)
        if (saved && !saved.submitted && typeof saved.text === "string" && saved.text !== area.value) {
          area.value = saved.text;
          if (saved.base) { base.value = saved.base; }
          changed();
          status.textContent = "Put back what you typed in this browser, which the server did not have yet; saving it now.";
        } else if (saved) {
          try { localStorage.removeItem(keptKey); } catch (e) {}
        }
        // A change to settle: the version chosen replaces the marked lines.
        function settle(number, choice) {
          var lines = area.value.split("\\n"), out = [], part = 0, count = 0;
          var mine = [], original = null, theirs = [], held = [];
          lines.forEach(function (line) {
            if (part === 0) {
              if (line.indexOf("<<<<<<<") === 0) { part = 1; count++; mine = []; original = null; theirs = []; held = [line]; }
              else { out.push(line); }
            } else if (part === 1 || part === 2) {
              held.push(line);
              if (part === 1 && line.indexOf("|||||||") === 0) { part = 2; original = []; }
              else if (line === "=======") { part = 3; }
              else if (part === 1) { mine.push(line); } else { original.push(line); }
            } else {
              held.push(line);
              if (line.indexOf(">>>>>>>") === 0) {
                var chosen = count !== number ? held : choice === "mine" ? mine : choice === "theirs" ? theirs : (original || []);
                Array.prototype.push.apply(out, chosen);
                part = 0;
              } else { theirs.push(line); }
            }
          });
          if (part !== 0) { Array.prototype.push.apply(out, held); }
          area.value = out.join("\\n");
          changed();
        }
        preview.addEventListener("click", function (e) {
          var button = e.target.closest && e.target.closest("button.choose");
          if (button) { settle(parseInt(button.getAttribute("data-hunk"), 10), button.getAttribute("data-choice")); }
        });
        var sessionChecked = false;
        editor.addEventListener("submit", function (e) {
          var publishing = !e.submitter || e.submitter.id === "publish";
          if (publishing && hasMarkers(area.value)) {
            e.preventDefault();
            status.textContent = "Settle each change first: the text still has conflict markers (<<<<<<<, =======, >>>>>>>).";
            return;
          }
          if (!sessionChecked) {
            // Sent only while signed in: otherwise the sign-in page would take the post's place.
            e.preventDefault();
            var submitter = e.submitter;
            fetch("/_session", { credentials: "same-origin", headers: { "Accept": "application/json" } })
              .then(function (r) { return r.json(); })
              .then(function (j) {
                function send() { sessionChecked = true; editor.requestSubmit(submitter || undefined); }
                if (j && j.userCtx && j.userCtx.name) { send(); } else { signInAgain(send); }
              })
              .catch(function () { sessionChecked = true; editor.requestSubmit(submitter || undefined); });
            return;
          }
          keep(true);
          dirty = false;
          if (timer) { clearTimeout(timer); timer = null; }
        });
        document.addEventListener("keydown", function (e) {
          if ((e.ctrlKey || e.metaKey) && e.key === "s") { e.preventDefault(); editor.requestSubmit(document.getElementById("publish")); }
        });
        window.addEventListener("beforeunload", function () { if (dirty && timer) { autosave(); } });
        // Files: dropped or chosen, each streamed to the attachment API as the page's next
        // revision (the draft's text is merged onto it when published).
        var attach = document.getElementById("attach");
        if (attach && attach.getAttribute("data-upload")) {
          var uploadStatus = document.getElementById("upload-status");
          var fileList = document.getElementById("file-list");
          var queue = Promise.resolve();
          function upload(file) {
            var url = attach.getAttribute("data-upload") + "/" + encodeURIComponent(file.name) +
              "?rev=" + encodeURIComponent(attach.getAttribute("data-rev"));
            uploadStatus.textContent = "Uploading " + file.name + "…";
            return fetch(url, { method: "PUT", body: file, credentials: "same-origin",
                headers: { "Content-Type": file.type || "application/octet-stream" } })
              .then(function (r) { return r.json().then(function (j) { return { ok: r.ok, j: j }; }); })
              .then(function (res) {
                if (!res.ok) { throw new Error(res.j.reason || res.j.error || "refused"); }
                attach.setAttribute("data-rev", res.j.rev);
                var li = document.createElement("li");
                var a = document.createElement("a");
                a.href = attach.getAttribute("data-upload") + "/" + encodeURIComponent(file.name);
                a.textContent = file.name;
                li.appendChild(a);
                var meta = document.createElement("span");
                meta.className = "meta";
                meta.textContent = " " + (file.type || "application/octet-stream") + " · " +
                  (file.size < 1024 ? file.size + " bytes" : Math.round(file.size / 1024) + " KB");
                li.appendChild(meta);
                fileList.appendChild(li);
                uploadStatus.textContent = "Uploaded " + file.name + ".";
                // The text may already name the file: the preview shows it now, not at the next keystroke.
                refreshPreview();
              })
              .catch(function (e) { uploadStatus.textContent = "Could not upload " + file.name + ": " + e.message; });
          }
          function uploadAll(files) {
            Array.prototype.forEach.call(files, function (f) { queue = queue.then(function () { return upload(f); }); });
          }
          document.getElementById("file-input").addEventListener("change", function (e) { uploadAll(e.target.files); e.target.value = ""; });
          attach.addEventListener("dragover", function (e) { e.preventDefault(); attach.classList.add("dropping"); });
          attach.addEventListener("dragleave", function () { attach.classList.remove("dropping"); });
          attach.addEventListener("drop", function (e) {
            e.preventDefault();
            attach.classList.remove("dropping");
            if (e.dataTransfer && e.dataTransfer.files) { uploadAll(e.dataTransfer.files); }
          });
        }
      } else {
        // A page's files: Replace streams the chosen file to the attachment API under the
        // file's name, on the revision shown, then shows the page again.
        Array.prototype.forEach.call(document.querySelectorAll("input.replace-input"), function (input) {
          input.addEventListener("change", function () {
            var file = input.files && input.files[0];
            if (!file) { return; }
            var name = input.getAttribute("data-name");
            var replaceStatus = document.getElementById("replace-status");
            replaceStatus.textContent = "Replacing " + name + "…";
            fetch(input.getAttribute("data-upload") + "/" + encodeURIComponent(name) + "?rev=" +
                encodeURIComponent(input.getAttribute("data-rev")),
              { method: "PUT", body: file, credentials: "same-origin",
                headers: { "Content-Type": file.type || "application/octet-stream" } })
              .then(function (r) { return r.json().then(function (j) { return { ok: r.ok, j: j }; }); })
              .then(function (res) {
                if (!res.ok) { throw new Error(res.j.reason || res.j.error || "refused"); }
                location.reload();
              })
              .catch(function (e) { replaceStatus.textContent = "Could not replace " + name + ": " + e.message; });
          });
        });
        // A page just published: the copy of its text the browser kept can go.
        if (location.hash === "#published") {
          var editLink = document.getElementById("edit");
          if (editLink) {
            try { localStorage.removeItem("wikilog-unsaved:" + editLink.getAttribute("href").replace("?action=edit", "?action=publish")); } catch (e) {}
          }
          history.replaceState(null, "", location.pathname + location.search);
        }
        // Elsewhere: "e" edits the page shown.
        document.addEventListener("keydown", function (e) {
          var t = e.target && e.target.tagName;
          if (e.key === "e" && !e.ctrlKey && !e.metaKey && t !== "INPUT" && t !== "TEXTAREA") {
            var edit = document.getElementById("edit");
            if (edit) { window.location = edit.href; }
          }
        });
      }
      // Everywhere: "/" goes to the header's search box (as on GitHub and MediaWiki).
      document.addEventListener("keydown", function (e) {
        var t = e.target && e.target.tagName;
        if (e.key !== "/" || e.ctrlKey || e.metaKey || e.altKey) return;
        if (t === "INPUT" || t === "TEXTAREA" || t === "SELECT" || (e.target && e.target.isContentEditable)) return;
        var box = document.querySelector("form#search input[name=q]");
        if (box) { e.preventDefault(); box.focus(); }
      });
      // The Sync page, live: each sync's state and counters as the server sends them.
      var syncs = document.getElementById("syncs");
      if (syncs && window.EventSource && syncs.getAttribute("data-events")) {
        var events = new EventSource(syncs.getAttribute("data-events"));
        events.onmessage = function (m) {
          var list;
          try { list = JSON.parse(m.data); } catch (err) { return; }
          var known = {};
          list.forEach(function (sync) {
            known[sync.id] = true;
            var section = syncs.querySelector('[data-sync="' + sync.id + '"]');
            if (!section) { window.location.reload(); return; }
            section.querySelector('[data-field="sync-state"]').textContent = sync.state;
            sync.directions.forEach(function (d) {
              var row = section.querySelector('[data-doc="' + d.doc_id + '"]');
              if (!row) { return; }
              // Refused documents listed or gone: the page lists them, with their reasons.
              if (String((d.refused || []).length) !== row.getAttribute("data-refused")) { window.location.reload(); return; }
              function set(field, text) { var c = row.querySelector('[data-field="' + field + '"]'); if (c) { c.textContent = text; } }
              set("state", d.state);
              set("docs_read", d.docs_read);
              set("docs_written", d.docs_written);
              set("pending", d.pending === undefined ? "–" : d.pending);
              var last = row.querySelector('[data-field="last_activity"]');
              if (last) { last.textContent = ""; if (d.last_activity) { last.appendChild(timeElement(d.last_activity)); } }
              set("error", d.error || "");
              var retry = row.querySelector('[data-field="next_retry"]');
              if (retry) {
                retry.textContent = "";
                if (d.next_retry) {
                  retry.appendChild(document.createTextNode("Next try "));
                  retry.appendChild(timeElement(d.next_retry));
                  retry.appendChild(document.createTextNode("."));
                }
              }
              set("advice", d.advice || "");
            });
          });
          var indicator = document.getElementById("sync-indicator");
          if (indicator && list.length) {
            var worst = list.map(function (s) { return s.state; });
            var order = ["needs attention", "failed", "offline", "not all sent", "not all received", "paused", "starting", "waiting", "active", "up to date"];
            var state = order.filter(function (s) { return worst.indexOf(s) >= 0; })[0] || "up to date";
            indicator.textContent = "Sync: " + state;
            indicator.className = "sync-indicator sync-" + state.replace(/ /g, "-");
          }
        };
      }
      // Recent changes, live from the changes feed (the user's own view of it).
      var recent = document.getElementById("recent");
      if (recent && window.EventSource && recent.getAttribute("data-feed")) {
        var source = new EventSource(recent.getAttribute("data-feed"), { withCredentials: true });
        source.onmessage = function (m) {
          try {
            var row = JSON.parse(m.data);
            var id = row.id, colon = id.indexOf(":");
            if (id.charAt(0) === "_") return;
            var wiki = colon < 0 ? id : id.slice(0, colon);
            var only = recent.getAttribute("data-wiki");
            if (only !== null && wiki !== only) return;
            var empty = recent.querySelector("li.empty");
            if (empty) empty.remove();
            var href = "/_wiki/" + encodeURIComponent(wiki) + "/" + (colon < 0 ? "" : encodeURIComponent(id.slice(colon + 1)));
            var li = document.createElement("li");
            li.className = "edit live";
            var a = document.createElement("a");
            a.href = href;
            a.textContent = colon < 0 ? id : id.slice(colon + 1);
            li.appendChild(a);
            if (row.deleted) {
              li.className = "deleted";
              var mark = document.createElement("strong");
              mark.className = "deleted-mark";
              mark.textContent = "deleted";
              li.appendChild(document.createTextNode(" "));
              li.appendChild(mark);
            }
            var meta = document.createElement("span");
            meta.className = "meta";
            var wikiTitle = recent.getAttribute("data-wiki-title");
            meta.textContent = " " + (wikiTitle ? wikiTitle + " · " : "") + "just now";
            li.appendChild(meta);
            var rev = row.changes && row.changes[0] && row.changes[0].rev;
            if (colon >= 0 && rev) {
              var links = document.createElement("span");
              links.className = "edit-links";
              links.appendChild(document.createTextNode(" "));
              if (!row.deleted) {
                var r = document.createElement("a");
                r.className = "revision";
                r.href = href + "?rev=" + encodeURIComponent(rev);
                var dash = rev.indexOf("-");
                r.textContent = "revision " + rev.slice(0, dash) + "-" + rev.slice(dash + 1, dash + 8);
                links.appendChild(r);
                links.appendChild(document.createTextNode(" · "));
              }
              var d = document.createElement("a");
              d.className = "diff";
              d.href = href + "?action=history";
              d.textContent = "diff";
              links.appendChild(d);
              li.appendChild(links);
            }
            recent.insertBefore(li, recent.firstChild);
          } catch (err) { }
        };
      }
    })();
    """
}
