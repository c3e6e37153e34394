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
      --bg: #fbfcfd; --missing: #c0392b; font-family: system-ui, -apple-system, "Segoe UI", "DejaVu Sans", sans-serif; }
    * { box-sizing: border-box; }
    body { margin: 0; color: var(--ink); background: var(--bg); line-height: 1.55; }
    a { color: var(--accent); text-decoration: none; }
    a:hover { text-decoration: underline; }
    header.top { display: flex; gap: 1.5rem; align-items: center; padding: .6rem 1.2rem;
      background: #fff; border-bottom: 1px solid var(--line); flex-wrap: wrap; }
    header.top .brand { font-weight: 700; color: var(--ink); font-size: 1.15rem; }
    header.top nav { display: flex; gap: 1rem; flex: 1; }
    header.top .who { display: flex; gap: .6rem; align-items: center; color: var(--muted); }
    header.top form { display: inline; margin: 0; }
    main { max-width: 68rem; margin: 0 auto; padding: 1.2rem; }
    h1 { font-size: 1.7rem; margin: .4rem 0 .8rem; }
    h2 { font-size: 1.15rem; margin-top: 1.6rem; }
    .meta, .crumbs { color: var(--muted); font-size: .92rem; }
    .attach { margin-top: 1.2rem; padding: .6rem 1rem; border: 2px dashed #ccd3db; border-radius: 8px; }
    .attach.dropping { border-color: #2b6cb0; background: #eef5fd; }
    .file-pick input { margin-left: .4rem; }
    ul.files { padding-left: 1.2rem; }
    .markdown img { max-width: 100%; }
    header.top form.search { margin-left: auto; margin-right: .8rem; }
    header.top form.search input { padding: .3rem .6rem; border: 1px solid #ccd3db; border-radius: 6px; width: 14rem; max-width: 40vw; }
    .search-page input[type=search] { padding: .4rem .6rem; width: 24rem; max-width: 70vw; }
    ol#results { padding-left: 1.4rem; }
    li.hit { margin: .8rem 0; }
    li.hit .title { font-weight: 600; }
    .snippet { margin: .2rem 0; }
    mark { background: #fff1a8; padding: 0 .1rem; }
    .sync-indicator { font-size: .88rem; padding: .15rem .5rem; border-radius: 999px; border: 1px solid var(--border, #ccd); text-decoration: none; }
    .sync-offline, .sync-failed { background: var(--warn); }
    .sync-state { font-size: .9rem; font-weight: normal; color: var(--muted); }
    .sync-directions { border-collapse: collapse; width: 100%; margin: .4rem 0; }
    .sync-directions th, .sync-directions td { text-align: left; padding: .25rem .5rem; border-bottom: 1px solid #e3e6ea; font-size: .92rem; }
    .sync-actions { margin: .4rem 0 1.2rem; }
    form.stacked label { display: block; margin: .4rem 0; }
    form.stacked input { display: block; width: 100%; max-width: 32rem; }
    .bar { padding: .6rem 1rem; background: #eaf2fc; border: 1px solid #c9ddf5; border-radius: 6px; margin: .8rem auto; max-width: 68rem; }
    .bar.warn { background: var(--warn); border-color: #efd38a; }
    .bar form { display: inline; }
    .error { color: var(--missing); }
    .empty { color: var(--muted); }
    ul.cards { list-style: none; padding: 0; display: grid; gap: .6rem; }
    ul.cards li { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: .7rem 1rem; }
    ul.cards .wiki { font-weight: 600; font-size: 1.08rem; display: block; }
    form { margin: 1rem 0; }
    label { display: block; margin: .4rem 0; }
    input, textarea, button { font: inherit; }
    input, textarea { padding: .4rem .5rem; border: 1px solid var(--line); border-radius: 5px; background: #fff; }
    textarea { width: 100%; font-family: "DejaVu Sans Mono", ui-monospace, monospace; font-size: .92rem; }
    button { padding: .4rem .9rem; border: 1px solid var(--accent); background: var(--accent); color: #fff; border-radius: 5px; cursor: pointer; }
    button#discard, header.top button { background: #fff; color: var(--accent); }
    .columns { display: grid; grid-template-columns: 1fr 1fr; gap: 1.5rem; }
    .narrow { max-width: 24rem; margin: 3rem auto; }
    .markdown { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 1rem 1.3rem; overflow-wrap: anywhere; }
    .markdown table { border-collapse: collapse; }
    .markdown th, .markdown td { border: 1px solid var(--line); padding: .3rem .6rem; }
    .markdown pre, pre { background: #f3f5f7; padding: .7rem; border-radius: 6px; overflow-x: auto; }
    a.missing-page { color: var(--missing); border-bottom: 1px dashed var(--missing); }
    .editor-panes { display: grid; grid-template-columns: 1fr 1fr; gap: 1rem; }
    .editor-bar { display: flex; gap: .8rem; align-items: center; }
    #draft-status { flex: 1; color: var(--muted); }
    pre.diff { white-space: pre-wrap; }
    ol#history li { margin-bottom: 1rem; }
    table#blame { border-collapse: collapse; width: 100%; font-size: .9rem; }
    table#blame td, table#blame th { border-bottom: 1px solid var(--line); padding: .15rem .5rem; text-align: left; vertical-align: top; }
    table#blame td.text code { white-space: pre-wrap; }
    .leaves { display: grid; grid-template-columns: repeat(auto-fit, minmax(18rem, 1fr)); gap: 1rem; }
    .leaf { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: .7rem; }
    .actions { float: right; }
    @media (max-width: 760px) {
      .columns, .editor-panes { grid-template-columns: 1fr; }
      .actions { float: none; }
      main { padding: .7rem; }
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
      function readableAll() { Array.prototype.forEach.call(document.querySelectorAll("time[datetime]"), readable); }
      readableAll();
      setInterval(readableAll, 30000);
      function post(url, fields) {
        var body = new URLSearchParams(fields);
        body.set("csrf", csrf);
        return fetch(url, { method: "POST", body: body, credentials: "same-origin",
          headers: { "Content-Type": "application/x-www-form-urlencoded" } });
      }
      // The editor: live preview and a draft autosaved two seconds after the last keystroke.
      var editor = document.getElementById("editor");
      if (editor) {
        var area = document.getElementById("markdown");
        var status = document.getElementById("draft-status");
        var preview = document.getElementById("preview");
        var base = editor.querySelector("input[name=base]");
        var timer = null, previewTimer = null, dirty = false;
        function autosave() {
          timer = null;
          post(editor.getAttribute("data-autosave"), { markdown: area.value, base: base.value })
            .then(function (r) { return r.ok ? r.json() : Promise.reject(r.status); })
            .then(function (j) {
              dirty = false;
              status.textContent = "Draft saved ";
              status.appendChild(timeElement(j.saved_at));
              status.appendChild(document.createTextNode(" (not published yet)."));
            })
            .catch(function (e) { status.textContent = "Could not save the draft (" + e + ")."; });
        }
        area.addEventListener("input", function () {
          dirty = true;
          status.textContent = "Typing…";
          if (timer) { clearTimeout(timer); }
          timer = setTimeout(autosave, 2000);
          if (previewTimer) { clearTimeout(previewTimer); }
          previewTimer = setTimeout(function () {
            post(editor.getAttribute("data-preview"), { markdown: area.value })
              .then(function (r) { return r.text(); })
              .then(function (html) { preview.innerHTML = html; });
          }, 400);
        });
        editor.addEventListener("submit", function () { dirty = false; if (timer) { clearTimeout(timer); } });
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
        // Elsewhere: "e" edits the page shown.
        document.addEventListener("keydown", function (e) {
          var t = e.target && e.target.tagName;
          if (e.key === "e" && !e.ctrlKey && !e.metaKey && t !== "INPUT" && t !== "TEXTAREA") {
            var edit = document.getElementById("edit");
            if (edit) { window.location = edit.href; }
          }
        });
      }
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
              var problem = row.querySelector('[data-field="problem"]');
              if (problem) {
                problem.textContent = d.error || "";
                if (d.next_retry) {
                  problem.appendChild(document.createTextNode("; next try "));
                  problem.appendChild(timeElement(d.next_retry));
                }
              }
            });
          });
          var indicator = document.getElementById("sync-indicator");
          if (indicator && list.length) {
            var worst = list.map(function (s) { return s.state; });
            var order = ["failed", "offline", "not all sent", "paused", "starting", "waiting", "active", "up to date"];
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
            var wiki = colon < 0 ? id : id.slice(0, colon);
            var href = "/_wiki/" + encodeURIComponent(wiki) + "/" + (colon < 0 ? "" : encodeURIComponent(id.slice(colon + 1)));
            var li = document.createElement("li");
            var a = document.createElement("a");
            a.href = href;
            a.textContent = colon < 0 ? id : id.slice(colon + 1);
            li.appendChild(a);
            var meta = document.createElement("span");
            meta.className = "meta";
            meta.textContent = " just now";
            li.appendChild(meta);
            recent.insertBefore(li, recent.firstChild);
          } catch (err) { }
        };
      }
    })();
    """
}
