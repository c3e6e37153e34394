import Mustache

/// The UI's Mustache templates, compiled into the binary (so a copied `wikilog` needs no
/// resource files). `{{name}}` is HTML-escaped; `{{{name}}}` is used only for HTML the server
/// made itself (rendered Markdown, the page inside the layout).
enum Templates {
  static let library: MustacheLibrary = {
    var library = MustacheLibrary()
    for (name, text) in sources.merging(feedSources, uniquingKeysWith: { a, _ in a }) {
      // The templates are constants of this file: a parse error is a programming error that
      // every test run would show.
      try! library.register(text, named: name)
    }
    // The layout in two halves, before and after the page's body (``WikiSite/html``).
    let halves = sources["layout"]!.split(separator: "{{{body}}}", maxSplits: 1)
    try! library.register(String(halves[0]), named: "layout.head")
    try! library.register(String(halves[1]), named: "layout.tail")
    return library
  }()

  static func render(_ name: String, _ object: [String: Any]) -> String {
    library.render(object, withTemplate: name) ?? ""
  }

  static let sources: [String: String] = [
    "layout": """
    <!doctype html>
    <html lang="en">
    <head>
    <meta charset="utf-8">
    <meta name="viewport" content="width=device-width, initial-scale=1">
    <title>{{title}} · wikilog</title>
    <link rel="stylesheet" href="/_wiki/_static/app.css">
    <script src="/_wiki/_static/app.js" defer></script>
    {{#feedHref}}<link rel="alternate" type="application/atom+xml" title="{{feedTitle}}" href="{{feedHref}}">{{/feedHref}}
    </head>
    <body data-csrf="{{csrf}}">
    <a class="skip" href="#main">Skip to content</a>
    <header class="top">
      <a class="brand" href="/_wiki/">wikilog</a>
      <nav>
        {{#user}}<a href="/_wiki/">My wikis</a> <a id="nav-recent" href="/_wiki/_recent{{asOfQuery}}">Recent changes</a> <a id="nav-drafts" href="/_wiki/_drafts">My drafts</a> <a href="/_wiki/_sync">Sync</a> <a id="nav-settings" href="/_wiki/_settings">Settings</a>{{/user}}
      </nav>
      {{#user}}<form id="search" class="search" method="get" action="/_wiki/_search" role="search">{{#searchWiki}}<input type="hidden" name="wiki" value="{{searchWiki}}">{{/searchWiki}}{{#asOf}}<input type="hidden" name="as_of" value="{{asOf}}">{{/asOf}}<input name="q" type="search" placeholder="{{#searchWiki}}Search this wiki{{/searchWiki}}{{^searchWiki}}Search my wikis{{/searchWiki}}" aria-label="Search"></form>{{/user}}
      <div class="who">
        {{#sync}}<a id="sync-indicator" class="sync-indicator sync-{{syncState}}" href="/_wiki/_sync">{{sync}}</a>{{/sync}}
        {{#user}}<span id="user">{{user}}</span>
        <form id="signout" method="post" action="/_wiki/_signout"><input type="hidden" name="csrf" value="{{csrf}}"><button type="submit">Sign out</button></form>{{/user}}
      </div>
    </header>
    {{#asOf}}<div id="asof-bar" class="bar" role="status">Read-only: as of {{{asOfLabel}}}. Nothing here can be changed. <a id="asof-exit" href="{{asOfExit}}">Back to now</a></div>{{/asOf}}
    <main id="main" tabindex="-1">
    {{{body}}}
    </main>
    </body>
    </html>
    """,
    "signin": """
    <section class="narrow">
    <h1>Sign in</h1>
    {{#error}}<p class="error" id="signin-error">{{error}}</p>{{/error}}
    <form id="signin" method="post" action="/_wiki/_signin">
      <input type="hidden" name="next" value="{{next}}">
      <input type="hidden" name="csrf" value="{{csrf}}">
      <label>Name <input name="name" autocomplete="username" required autofocus value="{{name}}"></label>
      <label>Password <input name="password" type="password" autocomplete="current-password" required></label>
      <button type="submit">Sign in</button>
    </form>
    </section>
    """,
    "wikis": """
    <h1>My wikis</h1>
    {{{watchChanges}}}
    {{#watchChanges}}<h2>Your wikis</h2>{{/watchChanges}}
    <ul id="wikis" class="cards">
    {{#wikis}}
      <li><a class="wiki" href="{{href}}">{{title}}</a>
        <span class="meta">owner {{owner}} · {{#members}}{{.}} {{/members}}{{^members}}no other members{{/members}} · {{pages}} · updated {{{updated}}}</span></li>
    {{/wikis}}
    {{^wikis}}<li class="empty">No wikis yet.</li>{{/wikis}}
    </ul>
    <p class="meta"><a id="my-drafts" href="/_wiki/_drafts">My drafts</a>: the pages you started or changed and have not published yet.</p>
    <form id="create-wiki" method="post" action="/_wiki/">
      <input type="hidden" name="csrf" value="{{csrf}}">
      <label>New wiki <input name="title" required placeholder="Title"></label>
      <button type="submit">Create</button>
    </form>
    """,
    "wiki": """
    <h1>{{title}}</h1>
    {{#owner}}<p class="meta" id="wiki-meta">owner {{owner}} · members: <span id="wiki-members">{{#members}}{{.}} {{/members}}{{^members}}none{{/members}}</span>
     {{^readOnly}}· <a id="settings" href="?action=settings">Settings</a> · <a id="conflicts" href="?action=conflicts">Conflicts</a>{{/readOnly}}
     · <a id="recent" href="{{recentHref}}">Recent changes</a>{{#feedHref}} · <a id="wiki-feed" href="{{feedHref}}" type="application/atom+xml">Atom feed</a>{{/feedHref}}</p>{{/owner}}
    {{{watch}}}
    {{^readOnly}}<form id="new-page" method="get" action="{{newPageAction}}">
      <input type="hidden" name="action" value="edit">
      <label>New page <input name="title" required maxlength="{{maxTitle}}" placeholder="Page Name" aria-describedby="title-limit"></label>
      <button type="submit">Create</button>{{#maxTitle}} <span id="title-limit" class="meta">at most {{maxTitle}} characters</span>{{/maxTitle}}
    </form>{{/readOnly}}
    <div class="columns">
    <section><h2>Pages</h2>
    <ul id="pages">
    {{#pages}}<li><a class="page" href="{{href}}">{{title}}</a> <span class="meta">{{updatedBy}} {{{updatedAt}}}</span></li>{{/pages}}
    {{^pages}}<li class="empty">No pages yet.</li>{{/pages}}
    </ul></section>
    <section><h2>Recently changed</h2>
    <ol id="recent-pages">
    {{#recent}}<li><a href="{{href}}">{{title}}</a> <span class="meta">{{updatedBy}} {{{updatedAt}}}</span></li>{{/recent}}
    </ol></section>
    </div>
    """,
    "settings": """
    <h1>Settings of {{title}}</h1>
    {{#saved}}<p class="bar" id="settings-saved" role="status">Settings saved.</p>{{/saved}}
    <p class="meta">owner {{owner}}</p>
    <h2>Members</h2>
    <ul id="members">{{#members}}<li>{{.}}</li>{{/members}}{{^members}}<li class="empty">none</li>{{/members}}</ul>
    {{#isOwner}}
    <form id="settings" method="post" action="?action=settings">
      <input type="hidden" name="csrf" value="{{csrf}}">
      <input type="hidden" name="rev" value="{{rev}}">
      <label>Title <input name="title" required value="{{title}}"></label>
      <label>Members, one name a line <textarea name="members" rows="6">{{membersText}}</textarea></label>
      <button type="submit">Save</button>
    </form>
    {{/isOwner}}
    {{^isOwner}}<p>Only the owner changes the title and the members.</p>{{/isOwner}}
    <p><a href="{{wikiHref}}">Back to the wiki</a></p>
    """,
    "page": """
    <nav class="crumbs"><a href="{{wikiHref}}{{asOfQuery}}">{{wikiTitle}}</a></nav>
    {{#conflicted}}<div id="conflict-banner" class="bar warn">This page has conflicting revisions. <a id="resolve" href="{{wikiHref}}?action=conflicts">Resolve</a></div>{{/conflicted}}
    {{#oldRev}}<div id="old-revision" class="bar">You are viewing revision {{oldRev}}, not the current one.
      <form id="restore" method="post" action="{{pageHref}}?action=restore"><input type="hidden" name="csrf" value="{{csrf}}"><input type="hidden" name="rev" value="{{oldRev}}"><button type="submit">Restore this revision</button></form></div>{{/oldRev}}
    <div class="actions">{{^readOnly}}<a id="edit" href="{{pageHref}}?action=edit" accesskey="e">Edit</a> · {{/readOnly}}<a id="history" href="{{pageHref}}?action=history{{#asOf}}&amp;as_of={{asOf}}{{/asOf}}">History</a> · <a id="blame" href="{{pageHref}}?action=blame{{#asOf}}&amp;as_of={{asOf}}{{/asOf}}">Blame</a>{{^readOnly}} · <a id="rename" href="{{pageHref}}?action=rename">Rename</a> · <a id="delete" href="{{pageHref}}?action=delete">Delete</a>{{/readOnly}}<!--watch--></div>
    {{#titleHeading}}<h1 class="page-title">{{title}}</h1>{{/titleHeading}}{{^titleHeading}}<p class="page-title">{{title}}</p>{{/titleHeading}}
    <article id="content" class="markdown">{{{html}}}</article>
    {{#hasFiles}}<section id="files"><h2>Files</h2><ul class="files">{{#files}}<li><a href="{{href}}">{{name}}</a> <span class="meta">{{type}} · {{size}}</span>{{^readOnly}}{{^oldRev}} <span class="file-actions"><a class="remove-file" href="{{pageHref}}?action=remove-file&amp;name={{encodedName}}" aria-label="Remove {{name}}">Remove</a> · <label class="replace-file file-pick">Replace<span class="visually-hidden"> {{name}}</span> <input type="file" class="replace-input" data-name="{{name}}" data-upload="{{uploadURL}}" data-rev="{{rev}}"></label></span>{{/oldRev}}{{/readOnly}}</li>{{/files}}</ul><p id="replace-status" class="meta" aria-live="polite"></p></section>{{/hasFiles}}
    <footer class="page-meta">
      <p id="last-change">Last changed by {{updatedBy}} {{{updatedAt}}} · revision {{rev}}</p>
      <h2>What links here</h2>
      <ul id="backlinks">{{#backlinks}}<li><a href="{{href}}">{{title}}</a></li>{{/backlinks}}{{^backlinks}}<li class="empty">Nothing links here.</li>{{/backlinks}}</ul>
    </footer>
    """,
    "edit": """
    <nav class="crumbs"><a href="{{wikiHref}}">{{wikiTitle}}</a> › <a href="{{pageHref}}">{{title}}</a></nav>
    <h1>Editing {{title}}</h1>
    {{#conflict}}<div id="merge-conflict" class="bar warn" role="alert"><p>{{conflict}}</p></div>{{/conflict}}
    <form id="editor" method="post" action="{{pageHref}}?action=publish" data-autosave="{{pageHref}}?action=autosave" data-preview="{{pageHref}}?action=preview">
      <input type="hidden" name="csrf" value="{{csrf}}">
      <input type="hidden" name="base" value="{{base}}">
      <div class="editor-panes">
        <div class="editor-text">
          <div id="md-toolbar" class="md-toolbar" role="toolbar" aria-label="Formatting" aria-controls="markdown"><button type="button" data-md="bold" title="Bold (Ctrl+B)" aria-label="Bold"><b>B</b></button><button type="button" data-md="italic" title="Italic (Ctrl+I)" aria-label="Italic"><i>I</i></button><button type="button" data-md="heading" title="Heading" aria-label="Heading">H</button><button type="button" data-md="wikilink" title="Link to a page of this wiki" aria-label="Link to a page">[[ ]]</button><button type="button" data-md="link" title="Link to a web address" aria-label="Web link">Link</button><button type="button" data-md="list" title="Bulleted list" aria-label="Bulleted list">• List</button><button type="button" data-md="code" title="Code" aria-label="Code"><code>&lt;/&gt;</code></button><button type="button" data-md="quote" title="Quote" aria-label="Quote">“ ”</button></div>
          <label for="markdown" class="visually-hidden">Text of {{title}}, in Markdown</label><textarea id="markdown" name="markdown" rows="24" autofocus>{{markdown}}</textarea>
          <details id="markdown-help" class="md-help"><summary>Markdown help</summary>
            <table><thead><tr><th scope="col">Type</th><th scope="col">To get</th></tr></thead><tbody>
            <tr><td><code>[[Page name]]</code>, <code>[[Page name|its label]]</code></td><td>a link to a page of this wiki (red while the page does not exist yet)</td></tr>
            <tr><td><code>**bold**</code>, <code>*italic*</code>, <code>~~struck~~</code></td><td><strong>bold</strong>, <em>italic</em>, <del>struck</del></td></tr>
            <tr><td><code># Title</code>, <code>## Section</code></td><td>headings</td></tr>
            <tr><td><code>- item</code>, <code>1. item</code>, <code>- [ ] task</code></td><td>lists and task lists</td></tr>
            <tr><td><code>[text](https://example.com)</code></td><td>a link to a web address</td></tr>
            <tr><td><code>![what it shows](picture.png)</code></td><td>a picture attached to this page (drop it below)</td></tr>
            <tr><td><code>`code`</code>, a line of <code>```</code> before and after</td><td>code, inline or as a block</td></tr>
            <tr><td><code>&gt; quoted</code></td><td>a quotation</td></tr>
            <tr><td><code>| a | b |</code>, then <code>| --- | --- |</code>, then rows</td><td>a table</td></tr>
            </tbody></table>
          </details>
        </div>
        <section id="preview" class="markdown" aria-label="Preview">{{{preview}}}</section>
      </div>
      <p class="edit-summary"><label for="summary">Summary</label> <input id="summary" name="summary" value="{{summary}}" maxlength="500" placeholder="What you changed, in a few words" aria-describedby="summary-help"> <span id="summary-help" class="meta">shown in the history and recent changes</span></p>
      <p class="editor-bar"><span id="draft-status">{{{draftStatus}}}</span>
        <button id="publish" type="submit" accesskey="s">Publish</button>
        <button id="discard" type="submit" formaction="{{pageHref}}?action=discard" formnovalidate>Discard draft</button></p>
    </form>
    <section id="attach" class="attach"{{#currentRev}} data-upload="{{uploadURL}}" data-rev="{{currentRev}}"{{/currentRev}}>
      <h2>Files</h2>
      {{#currentRev}}<p class="meta">Drop files here, or <label class="file-pick">choose them <input type="file" id="file-input" multiple></label>. Show a picture with <code>![what it shows](name.png)</code>, link a file with <code>[its title](name.pdf)</code>.</p>{{/currentRev}}
      {{^currentRev}}<p class="meta">Publish the page once to attach files to it.</p>{{/currentRev}}
      <ul class="files" id="file-list">{{#files}}<li><a href="{{href}}">{{name}}</a> <span class="meta">{{type}} · {{size}}</span></li>{{/files}}</ul>
      <p id="upload-status" class="meta" aria-live="polite"></p>
    </section>
    """,
    "history": """
    <nav class="crumbs"><a href="{{wikiHref}}{{asOfQuery}}">{{wikiTitle}}</a> › <a href="{{pageHref}}{{asOfQuery}}">{{title}}</a></nav>
    <h1>History of {{title}}</h1>
    {{#asOf}}<p class="meta" id="history-asof">The revisions written up to that moment.</p>{{/asOf}}
    {{#renamedFrom}}<p id="renamed-from" class="bar">This page was renamed from <a href="{{renamedFromHref}}?action=history">{{renamedFromName}}</a>: the history before the rename is that page’s.</p>{{/renamedFrom}}
    {{#redirectTo}}<p id="redirect-to" class="bar">This page was renamed to <a href="{{redirectToHref}}">{{redirectToName}}</a>; this is its history before the rename.</p>{{/redirectTo}}
    <form id="compare-form" method="get" action="{{pageHref}}">
    <input type="hidden" name="action" value="compare">
    {{#canCompare}}<p class="compare-bar"><button type="submit" id="compare">Compare the selected revisions</button> <span class="meta">Choose an older revision in the first column and a newer one in the second.</span></p>{{/canCompare}}
    <ol id="history">
    {{#revisions}}<li class="revision{{#deleted}} deletion{{/deleted}}"><p>{{#canCompare}}<span class="pick">{{#viewable}}<input type="radio" name="from" value="{{rev}}" aria-label="Compare from the revision of {{plainTime}} by {{actor}}"{{#fromChecked}} checked{{/fromChecked}}><input type="radio" name="to" value="{{rev}}" aria-label="Compare to the revision of {{plainTime}} by {{actor}}"{{#toChecked}} checked{{/toChecked}}>{{/viewable}}</span> {{/canCompare}}{{#viewable}}<a class="view" href="{{pageHref}}?rev={{rev}}">{{/viewable}}<span class="time">{{{time}}}</span>{{#viewable}}</a>{{/viewable}}
      {{#deleted}}<strong class="deleted">deleted the page</strong>, {{/deleted}}by <span class="author">{{actor}}</span>{{#description}} — <span class="summary">{{description}}</span>{{/description}} <span class="origin">{{origin}}</span>
      {{#diffHref}}<a class="diff-link" href="{{diffHref}}">diff</a>{{/diffHref}} <span class="rev meta" title="revision {{rev}}">{{shortRev}}</span>
      <span class="asof-links">· <a class="page-asof" href="{{pageHref}}?as_of={{seq}}">the page as of then</a> · <a class="wiki-asof" href="{{wikiHref}}?as_of={{seq}}">view the wiki as of this revision</a></span></p>
      {{#redaction}}<p class="redacted">Redacted by <span class="author">{{redactedBy}}</span> <span class="time">{{{redactedAt}}}</span>{{reason}}: its text is erased.</p>{{/redaction}}
      {{#diff}}<pre class="diff">{{diff}}</pre>{{/diff}}</li>{{/revisions}}
    </ol>
    </form>
    """,
    "compare": """
    <nav class="crumbs"><a href="{{wikiHref}}">{{wikiTitle}}</a> › <a href="{{pageHref}}">{{title}}</a> › <a href="{{pageHref}}?action=history">History</a></nav>
    <h1>Changes to {{title}}</h1>
    <div class="compare-heads">
      <p id="compare-old" class="compare-head del-head"><span class="sign" aria-hidden="true">−</span> Old: <a href="{{pageHref}}?rev={{fromRev}}">{{{fromTime}}}</a> by {{fromActor}}{{#fromSummary}} — <span class="summary">{{fromSummary}}</span>{{/fromSummary}} <span class="rev meta">{{fromShort}}</span></p>
      <p id="compare-new" class="compare-head ins-head"><span class="sign" aria-hidden="true">+</span> New: <a href="{{pageHref}}?rev={{toRev}}">{{{toTime}}}</a> by {{toActor}}{{#toSummary}} — <span class="summary">{{toSummary}}</span>{{/toSummary}} <span class="rev meta">{{toShort}}</span></p>
    </div>
    <p class="diff-toggle" id="diff-toggle">Show: {{#inline}}<strong aria-current="true">inline</strong> · <a id="view-side" href="{{sideHref}}">side by side</a>{{/inline}}{{^inline}}<a id="view-inline" href="{{inlineHref}}">inline</a> · <strong aria-current="true">side by side</strong>{{/inline}} <span class="meta">· {{stats}}</span></p>
    {{#same}}<p id="no-changes" class="bar">The two revisions have the same text.</p>{{/same}}
    {{^same}}{{{table}}}{{/same}}
    """,
    "blame": """
    <nav class="crumbs"><a href="{{wikiHref}}{{asOfQuery}}">{{wikiTitle}}</a> › <a href="{{pageHref}}{{asOfQuery}}">{{title}}</a></nav>
    <h1>Blame of {{title}}</h1>
    <div class="table-scroll"><table id="blame"><thead><tr><th>Revision</th><th>Author</th><th>Time</th><th>Line</th></tr></thead>
    <tbody>{{#lines}}<tr><td class="rev"><a href="{{pageHref}}?rev={{rev}}" title="revision {{rev}}">{{shortRev}}</a>{{#summary}} <span class="summary">{{summary}}</span>{{/summary}}</td><td class="author">{{actor}}</td><td class="time">{{{time}}}</td><td class="text"><code>{{text}}</code></td></tr>{{/lines}}</tbody></table></div>
    """,
    "conflicts": """
    <nav class="crumbs"><a href="{{wikiHref}}">{{wikiTitle}}</a></nav>
    <h1>Conflicts in {{wikiTitle}}</h1>
    {{#pages}}<section class="conflict"><h2><a href="{{href}}">{{title}}</a></h2>
      <form class="resolve" method="post" action="{{wikiHref}}?action=resolve">
      <input type="hidden" name="csrf" value="{{csrf}}"><input type="hidden" name="page" value="{{id}}">
      <div class="leaves">{{#leaves}}<div class="leaf"><p><span class="rev">{{rev}}</span> by {{actor}}{{#winner}} (current){{/winner}}</p><pre>{{markdown}}</pre>
        <button type="submit" name="keep" value="{{rev}}">Keep this one</button></div>{{/leaves}}</div>
      </form></section>{{/pages}}
    {{^pages}}<p id="no-conflicts">No conflicts.</p>{{/pages}}
    """,
    "recent": """
    {{#wikiHref}}<nav class="crumbs"><a href="{{wikiHref}}">{{wikiTitle}}</a></nav>{{/wikiHref}}
    <h1>{{heading}}</h1>
    {{#feedHref}}<p class="meta" id="recent-feed"><a href="{{feedHref}}" type="application/atom+xml">Atom feed</a> of these changes, for a feed reader (it carries your feed token: <a href="/_wiki/_settings">Settings</a>).</p>{{/feedHref}}
    <ol id="recent"{{#feed}} data-feed="{{feed}}"{{/feed}}{{#wikiID}} data-wiki="{{wikiID}}" data-wiki-title="{{wikiTitle}}"{{/wikiID}}>
    {{#changes}}<li class="edit{{#deleted}} deleted{{/deleted}}"><a href="{{href}}">{{title}}</a>{{#deleted}} <strong class="deleted-mark">deleted</strong>{{/deleted}}{{#settings}} <span class="meta">{{#created}}created{{/created}}{{^created}}settings{{/created}}</span>{{/settings}} <span class="meta">{{wikiTitle}} · {{actor}} · {{{time}}}</span>{{#rev}} <span class="edit-links">{{#revisionHref}}<a class="revision" href="{{revisionHref}}">revision {{shortRev}}</a>{{/revisionHref}}{{#diffHref}} · <a class="diff" href="{{diffHref}}">diff</a>{{/diffHref}}</span>{{/rev}}{{#summary}} <span class="summary">{{summary}}</span>{{/summary}}</li>{{/changes}}
    {{^changes}}<li class="empty">No changes{{#asOf}} up to that moment{{/asOf}}.</li>{{/changes}}
    </ol>
    """,
    "sync-remove": """
    <h1>Remove the sync with {{remote}}?</h1>
    <p>Edits stop flowing between this server and {{remote}}, both ways. Nothing is deleted on either side: the pages stay where they are, and setting the sync up again later brings both sides together. The token this server made for the sync is revoked.</p>
    <form id="sync-remove" method="post" action="/_wiki/_sync"><input type="hidden" name="csrf" value="{{csrf}}"><input type="hidden" name="sync" value="{{id}}"><input type="hidden" name="action" value="remove"><input type="hidden" name="confirm" value="yes">
      <button type="submit" class="danger">Remove the sync</button> <a href="/_wiki/_sync">Keep it</a>
    </form>
    """,
    "sync": """
    <h1>Sync</h1>
    {{#disabled}}<p id="sync-status">This server runs no replications of its own: its data directory has no <code>_replicator</code> database. Replicate with a CouchDB, PouchDB or another wikilog from their side, signed in as a user of this server.</p>{{/disabled}}
    {{^disabled}}
    {{#error}}<p class="error" id="sync-error">{{error}}</p>{{/error}}
    <p class="meta">Two-way, continuous sync of this server's wiki database (<code>{{database}}</code>) with a database on another server: a wikilog, a CouchDB, or anything that speaks CouchDB's replication protocol. It runs on this server, with your rights here and the remote's credentials there, and keeps trying while either side is away; edits made meanwhile flow when it returns.</p>
    <div id="syncs" data-events="/_wiki/_sync/_events">
    {{#syncs}}<section class="sync" data-sync="{{id}}">
      <h2>{{remote}} <span class="sync-state" data-field="sync-state">{{state}}</span></h2>
      <p class="meta">Owned by {{owner}}.</p>
      <div class="table-scroll"><table class="sync-directions">
        <thead><tr><th>Direction</th><th>State</th><th>Changes read</th><th>Written</th><th>Pending</th><th>Last activity</th><th>Problem</th></tr></thead>
        <tbody>{{#directions}}<tr data-doc="{{docID}}" data-refused="{{refusedCount}}"><td>{{name}}</td><td data-field="state">{{state}}</td><td data-field="docs_read">{{docsRead}}</td><td data-field="docs_written">{{docsWritten}}</td><td data-field="pending">{{pending}}</td><td data-field="last_activity">{{{lastActivity}}}</td><td data-field="problem"><span data-field="error">{{#error}}{{error}}{{/error}}</span> <span data-field="next_retry">{{#nextRetry}}Next try {{{nextRetry}}}.{{/nextRetry}}</span> <strong class="sync-advice" data-field="advice">{{advice}}</strong></td></tr>{{/directions}}</tbody>
      </table></div>
      {{#directions}}{{#refusedSummary}}<div class="sync-refused" data-refused-doc="{{docID}}"><p class="error">{{name}}: {{refusedSummary}}:</p><ul>{{#refused}}<li><code>{{id}}</code>: {{reason}}</li>{{/refused}}</ul></div>{{/refusedSummary}}{{/directions}}
      <form class="sync-actions" method="post" action="/_wiki/_sync"><input type="hidden" name="csrf" value="{{csrf}}"><input type="hidden" name="sync" value="{{id}}">{{#paused}}<button name="action" value="resume">Resume</button>{{/paused}}{{^paused}}<button name="action" value="retry">Retry now</button> <button name="action" value="pause">Pause</button>{{/paused}} <button name="action" value="remove">Remove…</button></form>
      <details class="sync-credentials"><summary>Change credentials</summary>
      <form class="stacked" method="post" action="/_wiki/_sync"><input type="hidden" name="csrf" value="{{csrf}}"><input type="hidden" name="sync" value="{{id}}"><input type="hidden" name="action" value="credentials">
        <p class="meta">The remote's user name and password, or a token, replace those given before (leave all empty for a remote that needs none). This server's side gets a new token too.</p>
        <label>Remote user name <input name="username" autocomplete="off"></label>
        <label>Remote password <input name="password" type="password" autocomplete="new-password"></label>
        <label>or a token <input name="token" autocomplete="off"></label>
        <button type="submit">Save credentials</button>
      </form></details>
    </section>{{/syncs}}
    {{^syncs}}<p id="no-syncs">No sync is set up yet.</p>{{/syncs}}
    </div>
    <h2>Conflicts</h2>
    <p class="meta">Where both sides changed the same page, both versions arrive: the page says so and its wiki's Conflicts page lets you keep one.</p>
    <ul id="sync-conflicts">{{#conflicts}}<li><a href="{{href}}">{{wikiTitle}}</a>: {{count}} with conflicting versions</li>{{/conflicts}}{{^conflicts}}<li class="empty">None in your wikis.</li>{{/conflicts}}</ul>
    <h2>Set up a sync</h2>
    <form id="sync-add" class="stacked" method="post" action="/_wiki/_sync">
      <input type="hidden" name="csrf" value="{{csrf}}"><input type="hidden" name="action" value="add">
      <label>Remote database URL <input name="remote" type="url" required placeholder="https://team.example/wiki"></label>
      <label>Remote user name <input name="username" autocomplete="off"></label>
      <label>Remote password <input name="password" type="password" autocomplete="new-password"></label>
      <label>or a token (instead of name and password) <input name="token" autocomplete="off"></label>
      <button type="submit">Start syncing</button>
    </form>
    {{/disabled}}
    """,
    "search": """
    <h1>Search</h1>
    <form id="search-page" class="search-page" method="get" action="/_wiki/_search">
      <input name="q" type="search" value="{{q}}" aria-label="Search" autofocus>
      {{#wiki}}<label><input type="checkbox" name="wiki" value="{{wiki}}" checked> only in {{wikiTitle}}</label>{{/wiki}}
      <button type="submit">Search</button>
    </form>
    {{#present}}<p class="bar" id="search-present">Search is of the present: the index holds the pages as they are now, not as they were at {{asOf}}.</p>{{/present}}
    {{#error}}<p class="error" id="search-error">{{error}}</p>{{/error}}
    {{#searched}}<p class="meta" id="search-count">{{count}}{{#wiki}} in {{wikiTitle}}{{/wiki}}{{^wiki}} in your wikis{{/wiki}}.</p>
    <ol id="results">{{#hits}}<li class="hit"><a class="title" href="{{href}}">{{title}}</a> <span class="meta">in <a href="{{wikiHref}}">{{wikiTitle}}</a> · {{updatedBy}} {{{updatedAt}}}</span>
      <p class="snippet">{{{snippet}}}</p></li>{{/hits}}</ol>{{/searched}}
    """,
    "page-rename": """
    <nav class="crumbs"><a href="{{wikiHref}}">{{wikiTitle}}</a> › <a href="{{pageHref}}">{{title}}</a></nav>
    <h1>Rename “{{title}}”</h1>
    <p>The page moves to its new name with its text and files; its old name becomes a redirect to it, and its history stays under the old name, linked from the new page’s history.{{#backlinkText}} {{backlinkText}}{{/backlinkText}}</p>
    <form id="page-rename" class="stacked" method="post" action="{{pageHref}}?action=rename"><input type="hidden" name="csrf" value="{{csrf}}"><input type="hidden" name="rev" value="{{rev}}">
      <label>New name <input id="rename-name" name="name" value="{{name}}" required autofocus></label>
      <label>Wiki <select id="rename-wiki" name="wiki">{{#wikis}}<option value="{{id}}"{{#selected}} selected{{/selected}}>{{title}}</option>{{/wikis}}</select></label>
      <p><button type="submit">Rename the page</button> <a href="{{pageHref}}">Keep its name</a></p>
    </form>
    """,
    "page-renamed": """
    <nav class="crumbs"><a href="{{wikiHref}}">{{wikiTitle}}</a> › <a href="{{newHref}}">{{newTitle}}</a></nav>
    <h1>“{{title}}” is now “{{newTitle}}”</h1>
    <p id="renamed" class="bar">The page was renamed; “{{title}}” now sends readers to <a href="{{newHref}}">{{newTitle}}</a>.</p>
    <form id="relink" method="post" action="{{relinkAction}}"><input type="hidden" name="csrf" value="{{csrf}}"><input type="hidden" name="from" value="{{title}}">
      <fieldset><legend>Update the links to the old name in these pages</legend>
      <ul class="relink-pages">{{#backlinks}}<li><label><input type="checkbox" name="pages[]" value="{{title}}" checked> {{title}}</label> <a class="meta" href="{{href}}">view</a></li>{{/backlinks}}</ul>
      <p class="meta">Each chosen page gets a new revision by you, “link to renamed page”, with its <code>[[{{title}}]]</code> links naming “{{newTitle}}”.</p>
      </fieldset>
      <p><button type="submit" id="relink-submit">Update the chosen pages</button> <a id="skip-relink" href="{{newHref}}">Leave the links as they are</a></p>
    </form>
    """,
    "file-remove": """
    <nav class="crumbs"><a href="{{wikiHref}}">{{wikiTitle}}</a> › <a href="{{pageHref}}">{{title}}</a></nav>
    <h1>Remove “{{name}}” from “{{title}}”?</h1>
    <p>The page gets a new revision without <a href="{{fileHref}}">{{name}}</a> ({{size}}). Its earlier revisions keep it: an old revision from the history still shows it.</p>
    <form id="file-remove" class="confirm" method="post" action="{{pageHref}}?action=remove-file"><input type="hidden" name="csrf" value="{{csrf}}"><input type="hidden" name="rev" value="{{rev}}"><input type="hidden" name="name" value="{{name}}">
      <button type="submit" class="danger">Remove the file</button> <a href="{{pageHref}}">Keep it</a>
    </form>
    """,
    "page-delete": """
    <nav class="crumbs"><a href="{{wikiHref}}">{{wikiTitle}}</a> › <a href="{{pageHref}}">{{title}}</a></nav>
    <h1>Delete the page “{{title}}”?</h1>
    <p>The page leaves the wiki’s list of pages and its search{{#backlinkCount}}; {{backlinkText}} to it will show the link as missing{{/backlinkCount}}. Nothing is erased: its history keeps every revision, and who deleted it and when. Anyone who may edit this wiki can restore it from its address.</p>
    <form id="page-delete" class="confirm" method="post" action="{{pageHref}}?action=delete"><input type="hidden" name="csrf" value="{{csrf}}"><input type="hidden" name="rev" value="{{rev}}">
      <button type="submit" class="danger">Delete the page</button> <a href="{{pageHref}}">Keep it</a>
    </form>
    """,
    "page-deleted": """
    <nav class="crumbs"><a href="{{wikiHref}}">{{wikiTitle}}</a></nav>
    <section id="deleted-page">
    <h1 class="page-title">{{title}}</h1>
    <p id="deleted-notice" class="bar warn">This page was deleted by <span class="author">{{deletedBy}}</span> on {{{deletedAt}}}.</p>
    <p><a id="deleted-history" href="{{pageHref}}?action=history">See its history</a>{{#lastRev}} · <a id="last-text" href="{{pageHref}}?rev={{lastRev}}">the text it had before</a>{{/lastRev}}</p>
    {{#canRestore}}<form id="undelete" method="post" action="{{pageHref}}?action=restore"><input type="hidden" name="csrf" value="{{csrf}}"><input type="hidden" name="rev" value="{{lastRev}}"><button type="submit">Restore the page</button> <span class="meta">as it was before it was deleted, as a new revision</span></form>{{/canRestore}}
    {{#draftSaved}}<p id="draft-notice" class="bar">You have a draft of this page, saved {{{draftSaved}}}: <a id="open-draft" href="{{pageHref}}?action=edit">open it in the editor</a>. Publishing it brings the page back.</p>{{/draftSaved}}
    </section>
    """,
    "page-unpublished": """
    <nav class="crumbs"><a href="{{wikiHref}}">{{wikiTitle}}</a></nav>
    <section id="unpublished-page">
    <h1 class="page-title">{{title}}</h1>
    <p id="draft-notice" class="bar">This page is not published yet. You have a draft of it, saved {{{draftSaved}}}, which only you can see.</p>
    <p><a id="open-draft" href="{{pageHref}}?action=edit">Open your draft in the editor</a></p>
    </section>
    """,
    "drafts": """
    <h1>My drafts</h1>
    <p class="meta">Pages you started or changed and have not published yet. Only you see them; each is kept until you publish or discard it.</p>
    <ul id="drafts" class="cards">
    {{#drafts}}<li><a class="draft" href="{{editHref}}">{{title}}</a> <span class="meta">in <a href="{{wikiHref}}">{{wikiTitle}}</a> · {{#isNew}}a new page{{/isNew}}{{^isNew}}changes to the published page{{/isNew}} · saved {{{saved}}}</span>
      <form class="discard-draft" method="post" action="{{discardHref}}"><input type="hidden" name="csrf" value="{{csrf}}"><input type="hidden" name="back" value="drafts"><button type="submit" aria-label="Discard the draft of {{title}}">Discard</button></form></li>{{/drafts}}
    {{^drafts}}<li class="empty">No drafts: everything you wrote is published.</li>{{/drafts}}
    </ul>
    """,
    "notfound": """
    <section id="not-found">
    <h1>Not found</h1>
    <p>{{message}}</p>
    {{#createHref}}<p><a id="create-page" href="{{createHref}}">Create the page “{{title}}”</a></p>{{/createHref}}
    <p><a href="/_wiki/">My wikis</a></p>
    </section>
    """,
    "error": """
    <section><h1>{{heading}}</h1><p class="error">{{message}}</p><p><a href="/_wiki/">My wikis</a></p></section>
    """,
  ]
}
