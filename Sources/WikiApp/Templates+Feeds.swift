extension Templates {
  /// The templates of feeds, watch lists and users' settings (kept apart from the others').
  static let feedSources: [String: String] = [
    "watch-button": """
    <form class="watch" method="post" action="/_wiki/_watch"><input type="hidden" name="csrf" value="{{csrf}}"><input type="hidden" name="id" value="{{id}}"><input type="hidden" name="back" value="{{back}}">{{#watching}}<button id="watch" type="submit" name="action" value="unwatch" aria-pressed="true">Stop watching this {{what}}</button>{{/watching}}{{^watching}}<button id="watch" type="submit" name="action" value="watch" aria-pressed="false">Watch this {{what}}</button>{{/watching}}</form>
    """,
    "watch-changes": """
    <section id="watch-list">
    <h2>Changes since you last looked</h2>
    {{#hasChanges}}<ol id="watch-changes">{{#changes}}<li class="edit{{#deleted}} deleted{{/deleted}}"><a href="{{href}}">{{title}}</a>{{#deleted}} <strong class="deleted-mark">deleted</strong>{{/deleted}}{{#settings}} <span class="meta">settings</span>{{/settings}} <span class="meta">{{wikiTitle}} · {{actor}} · {{{time}}}</span> <span class="edit-links">{{#revisionHref}}<a class="revision" href="{{revisionHref}}">revision {{shortRev}}</a>{{/revisionHref}}{{#diffHref}} · <a class="diff" href="{{diffHref}}">diff</a>{{/diffHref}}</span></li>{{/changes}}</ol>
    <form id="mark-seen" method="post" action="/_wiki/_watch"><input type="hidden" name="csrf" value="{{csrf}}"><input type="hidden" name="back" value="/_wiki/"><button type="submit" name="action" value="seen">Mark all as seen</button></form>{{/hasChanges}}
    {{^hasChanges}}<p class="empty" id="watch-nothing">{{#hasWatching}}Nothing new in what you watch.{{/hasWatching}}{{^hasWatching}}You watch nothing yet: a page's or a wiki's “Watch” button adds it here.{{/hasWatching}}</p>{{/hasChanges}}
    {{#hasWatching}}<details id="watching"><summary>What you watch</summary><ul>{{#watching}}<li><a href="{{href}}">{{title}}</a> <span class="meta">{{#isWiki}}the whole wiki{{/isWiki}}{{^isWiki}}in {{wikiTitle}}{{/isWiki}}</span>
      <form class="watch" method="post" action="/_wiki/_watch"><input type="hidden" name="csrf" value="{{csrf}}"><input type="hidden" name="id" value="{{id}}"><input type="hidden" name="back" value="/_wiki/"><button type="submit" name="action" value="unwatch" aria-label="Stop watching {{title}}">Stop watching</button></form></li>{{/watching}}</ul></details>{{/hasWatching}}
    </section>
    """,
    "users": """
    <h1>Users</h1>
    <p class="meta">{{count}} users of this server. Invite someone with a link below, or make users with <code>wikilog user add</code>.</p>
    {{#changed}}<p class="bar" id="users-saved" role="status">{{changed}}</p>{{/changed}}
    <div class="table-scroll"><table id="users" class="users"><thead><tr><th>Name</th><th>Roles</th><th>Password</th><th>Status</th><th></th></tr></thead>
    <tbody>{{#users}}<tr{{#isDisabled}} class="disabled-user"{{/isDisabled}}><td class="name">{{name}}{{#isYou}} (you){{/isYou}}</td><td>{{roles}}{{#isAdmin}} (administrator){{/isAdmin}}</td><td>{{#hasPassword}}set{{/hasPassword}}{{^hasPassword}}none{{/hasPassword}}</td>
      <td class="status">{{#isDisabled}}<strong>disabled</strong>: cannot sign in{{/isDisabled}}{{^isDisabled}}active{{/isDisabled}}</td>
      <td class="user-actions">{{^isYou}}<form class="{{#isDisabled}}enable-user{{/isDisabled}}{{^isDisabled}}disable-user{{/isDisabled}}" method="post" action="/_wiki/_users"><input type="hidden" name="csrf" value="{{csrf}}"><input type="hidden" name="action" value="{{#isDisabled}}enable{{/isDisabled}}{{^isDisabled}}disable{{/isDisabled}}"><input type="hidden" name="name" value="{{name}}"><button type="submit" aria-label="{{#isDisabled}}Enable{{/isDisabled}}{{^isDisabled}}Disable{{/isDisabled}} {{name}}">{{#isDisabled}}Enable{{/isDisabled}}{{^isDisabled}}Disable{{/isDisabled}}</button></form> <form class="remove-user" method="post" action="/_wiki/_users"><input type="hidden" name="csrf" value="{{csrf}}"><input type="hidden" name="action" value="remove"><input type="hidden" name="name" value="{{name}}"><button type="submit" aria-label="Remove {{name}}">Remove…</button></form>{{/isYou}}</td></tr>{{/users}}</tbody></table></div>
    <p class="meta">A disabled user cannot sign in — not with their password, a session they had, or their API and feed tokens — until enabled; everything else of theirs is kept. Remove deletes the account (its history stays in the log).</p>
    """,
    "users-invitations": """
    <section id="invitations">
    <h2>Invitations</h2>
    <p class="meta">An invitation is a link that makes one account: whoever opens it chooses a name and a password. It works once, for seven days. Send it to one person only.</p>
    {{#link}}<div class="bar" id="invitation-made" role="status"><p>A new invitation link, shown this once (it is not kept):</p><p><code id="invitation-link" class="token">{{link}}</code></p></div>{{/link}}
    {{#hasInvitations}}<ul id="invitation-list">{{#invitations}}<li>Made by {{createdBy}} {{{createdAt}}}, good until {{{expiresAt}}} <form class="revoke-invitation" method="post" action="/_wiki/_users"><input type="hidden" name="csrf" value="{{csrf}}"><input type="hidden" name="action" value="revoke-invitation"><input type="hidden" name="name" value="{{id}}"><button type="submit" aria-label="Revoke the invitation made {{plainCreatedAt}}">Revoke</button></form></li>{{/invitations}}</ul>{{/hasInvitations}}
    {{^hasInvitations}}<p id="no-invitations" class="empty">No invitation is waiting to be used.</p>{{/hasInvitations}}
    <form id="invite-form" method="post" action="/_wiki/_users"><input type="hidden" name="csrf" value="{{csrf}}"><input type="hidden" name="action" value="invite"><button type="submit">Make an invitation link</button></form>
    </section>
    """,
    "invite": """
    <section class="narrow">
    <h1>Make your account</h1>
    <p class="meta">You were invited to this wiki server. Choose the name you will sign in with, and a password.</p>
    {{#error}}<p class="error" id="invite-error" role="alert">{{error}}</p>{{/error}}
    <form id="invite" class="stacked" method="post" action="/_wiki/_invite">
      <input type="hidden" name="csrf" value="{{csrf}}">
      <label>Invitation code (in the link, after #) <input id="invite-code" name="code" value="{{code}}" autocomplete="off" required></label>
      <label>Name <input name="name" autocomplete="username" required value="{{name}}"></label>
      <label>Password (at least 8 characters) <input name="password" type="password" autocomplete="new-password" minlength="8" required></label>
      <label>Password again <input name="password2" type="password" autocomplete="new-password" minlength="8" required></label>
      <button type="submit">Make my account</button>
    </form>
    </section>
    """,
    "user-remove": """
    <h1>Remove the user {{name}}?</h1>
    <p>{{name}} can no longer sign in, and their API and feed tokens stop working. Nothing they wrote is removed: the wikis keep every revision with its author. A user made again under this name gets this name's wikis back.</p>
    <form id="user-remove" class="confirm" method="post" action="/_wiki/_users"><input type="hidden" name="csrf" value="{{csrf}}"><input type="hidden" name="action" value="remove"><input type="hidden" name="name" value="{{name}}"><input type="hidden" name="confirm" value="yes">
      <button type="submit" class="danger">Remove {{name}}</button> <a href="/_wiki/_users">Keep them</a>
    </form>
    """,
    "user-settings": """
    <h1>Settings</h1>
    <p class="meta">Signed in as <strong>{{name}}</strong>.{{#isAdmin}} <a id="manage-users" href="/_wiki/_users">Manage users</a>{{/isAdmin}}</p>
    {{#saved}}<p class="bar" id="settings-saved" role="status">{{saved}}</p>{{/saved}}
    <section id="feed-token">
    <h2>Feeds</h2>
    <p class="meta">Feed readers cannot sign in: they read your Atom feeds with a feed token in the address. It shows what you may read, and nothing else can be done with it (it cannot write, nor sign in). Anyone with the address can read those feeds: make a new token if it leaks.</p>
    {{#token}}<p>Your feed token, made {{{tokenMade}}}{{#tokenUsed}}, last used {{{tokenUsed}}}{{/tokenUsed}}: <code id="token" class="token">{{token}}</code></p>
    <p>The recent changes of all your wikis: <a id="all-feed" href="{{allFeed}}" type="application/atom+xml">{{allFeed}}</a>. Each wiki, its recent changes and each page offer their own feed, which feed readers find on them.</p>{{/token}}
    {{^token}}<p id="no-token">You have no feed token yet.</p>{{/token}}
    <form id="feed-token-form" method="post" action="/_wiki/_settings"><input type="hidden" name="csrf" value="{{csrf}}">
      <button type="submit" name="action" value="token">{{#token}}Make a new feed token{{/token}}{{^token}}Make a feed token{{/token}}</button>{{#token}} <button type="submit" name="action" value="revoke" class="danger">Revoke it</button>{{/token}}
    </form>
    </section>
    <section id="password">
    <h2>Password</h2>
    {{#error}}<p class="bar warn error" id="settings-error" role="alert">{{error}}</p>{{/error}}
    <form id="password-form" class="stacked" method="post" action="/_wiki/_settings"><input type="hidden" name="csrf" value="{{csrf}}"><input type="hidden" name="action" value="password">
      <label>Current password <input name="old_password" type="password" autocomplete="current-password" required></label>
      <label>New password (at least 8 characters) <input name="new_password" type="password" autocomplete="new-password" minlength="8" required></label>
      <label>New password again <input name="new_password2" type="password" autocomplete="new-password" minlength="8" required></label>
      <button type="submit">Change the password</button>
    </form>
    </section>
    """,
  ]
}
