import Auth
import CouchAPI
import Formats
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import JSON
import Log
import Logging
import NIOCore
import Projections
import Query
import Replication
import Testing
import Wiki
import WikiApp

/// A data directory with users (alice owns `w1` with bob; carol owns `w2`), served with the UI.
final class UIFixture: Sendable {
  let path: String
  let data: DataDirectory
  let store: DocumentStore
  let auth: Authenticator

  /// `rules: false`: the wiki's projections without its access rules (the security object
  /// alone decides who reads the database).
  init(_ name: String = #function, rules: Bool = true, replicator: Bool = false) throws {
    let safe = name.filter { $0.isLetter || $0.isNumber }.prefix(40)
    path = NSTemporaryDirectory() + "wikilog-ui-\(safe)-\(UUID().uuidString)"
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    let system: [SystemDatabase] = replicator ? [.users, .replicator] : [.users]
    let wiki = DataDirectory.wiki(path: path, systemDatabases: system)
    data =
      rules
      ? wiki
      : DataDirectory(
        path: path, projections: { [WikiProjection(), DraftProjection(), WikiAccessProjection()] },
        validation: .touchWiki, systemDatabases: system)
    let users = try UserStore(data: data)
    for name in ["admin", "alice", "bob", "carol"] {
      let salt = "0123456789abcdef0123456789abcdef"
      let key = Password.pbkdf2(
        password: Array("pw-\(name)".utf8), salt: Array(salt.utf8), iterations: 10)!
      _ = try users.put(
        JSONObject([
          "_id": .string(UserStore.documentID(of: name)), "name": .string(name),
          "roles": .array(name == "admin" ? [.string("_admin")] : []), "type": .string("user"),
          "password_scheme": .string("pbkdf2"), "pbkdf2_prf": .string("sha256"),
          "iterations": .number(JSONNumber(Int64(10))), "salt": .string(salt),
          "derived_key": .string(Hex.encode(key)),
        ]), actor: "test")
    }
    auth = try Authenticator(data: data)
    store = try data.create("wiki")
    try store.put(
      #"{"type":"wiki","title":"Secret w1","owner_id":"alice","members":["bob"]}"#, id: "w1",
      actor: "alice")
    try store.put(
      JSONValue.object(
        JSONObject([
          "type": .string("page"), "wiki_id": .string("w1"),
          "markdown": .string("# Home\nSee [[Other]] and [[Missing]]."),
        ])
      ).serialized(), id: "w1:Home", actor: "alice")
    try store.put(
      #"{"type":"page","wiki_id":"w1","markdown":"Other text"}"#, id: "w1:Other", actor: "bob")
    try store.put(
      #"{"type":"wiki","title":"Carol's","owner_id":"carol","members":[]}"#, id: "w2",
      actor: "carol")
  }

  deinit {
    data.closeAll()
    try? FileManager.default.removeItem(atPath: path)
  }

  func withServer(
    logger: Logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() },
    _ mode: TestingSetup = .router, port: Int = 0,
    options configure: (inout CouchServerOptions) -> Void = { _ in },
    _ body: @Sendable (any TestClientProtocol) async throws -> Void
  ) async throws {
    var options = CouchServerOptions()
    options.authenticator = auth
    configure(&options)
    let app = buildWikiApplication(
      dataDirectory: data, options: options,
      configuration: ApplicationConfiguration(address: .hostname("127.0.0.1", port: port)),
      logger: logger)
    try await app.test(mode) { client in try await body(client) }
  }
}

struct Page {
  let status: Int
  let headers: HTTPFields
  let text: String

  /// The page's CSRF token.
  var csrf: String? {
    text.firstMatch(of: #/data-csrf="([0-9a-f]+)"/#).map { String($0.1) }
  }
}

extension TestClientProtocol {
  func page(
    _ method: HTTPRequest.Method, _ uri: String, as user: String?, form: [String: String]? = nil,
    headers extra: HTTPFields = [:]
  ) async throws -> Page {
    var headers = extra
    if let user {
      headers[.authorization] = "Basic " + Data("\(user):pw-\(user)".utf8).base64EncodedString()
    }
    var body: ByteBuffer? = nil
    if let form {
      headers[.contentType] = "application/x-www-form-urlencoded"
      body = ByteBuffer(
        string: form.map {
          "\($0.key)=\($0.value.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")"
        }.joined(separator: "&"))
    }
    return try await execute(uri: uri, method: method, headers: headers, body: body) { r in
      Page(status: Int(r.status.code), headers: r.headers, text: String(buffer: r.body))
    }
  }
}

@Suite struct WikiAppTests {
  @Test(
    "sign-in: anonymous pages redirect to it; a browser's / goes to the UI; the cookie is HttpOnly and SameSite"
  )
  func signIn() async throws {
    let fixture = try UIFixture()
    try await fixture.withServer { client in
      let home = try await client.page(.get, "/_wiki/", as: nil)
      #expect(home.status == 303)
      #expect(home.headers[.location]?.hasPrefix("/_wiki/_signin?next=") == true)
      let browser = try await client.page(.get, "/", as: nil, headers: [.accept: "text/html"])
      #expect(browser.status == 302 && browser.headers[.location] == "/_wiki/")
      let api = try await client.page(.get, "/", as: nil)
      #expect(api.text.contains("Welcome"))
      let form = try await client.page(.get, "/_wiki/_signin", as: nil)
      #expect(form.text.contains(#"id="signin""#))
      // The sign-in form's CSRF token, doubled in a SameSite=Strict cookie.
      let token = try #require(
        form.text.firstMatch(of: #/name="csrf" value="([0-9a-f]+)"/#).map { String($0.1) })
      #expect(form.headers[.setCookie]?.contains("SameSite=Strict") == true)
      let jar: HTTPFields = [.cookie: "wikilog_signin=\(token)"]
      let forged = try await client.page(
        .post, "/_wiki/_signin", as: nil, form: ["name": "alice", "password": "pw-alice"])
      #expect(forged.status == 403)
      let wrong = try await client.page(
        .post, "/_wiki/_signin", as: nil,
        form: ["name": "alice", "password": "nope", "csrf": token], headers: jar)
      #expect(wrong.status == 401)
      #expect(wrong.text.contains("Name or password is incorrect."))
      let ok = try await client.page(
        .post, "/_wiki/_signin", as: nil,
        form: ["name": "alice", "password": "pw-alice", "next": "/_wiki/w1/", "csrf": token],
        headers: jar)
      #expect(ok.status == 303 && ok.headers[.location] == "/_wiki/w1/")
      let cookie = try #require(ok.headers[.setCookie])
      #expect(cookie.contains("HttpOnly") && cookie.contains("SameSite=Lax"))
      // The cookie signs the UI in, as it does the API.
      let signed = try await client.page(
        .get, "/_wiki/", as: nil, headers: [.cookie: String(cookie.prefix { $0 != ";" })])
      #expect(signed.status == 200)
      // The forms' token does not come from the cookie, so a renewed cookie keeps it valid:
      // the same with this session as with Basic, for the same user.
      let basicToken = try await client.page(.get, "/_wiki/", as: "alice").csrf
      #expect(signed.csrf != nil && signed.csrf == basicToken)
      #expect(signed.text.contains("Secret w1"))
      #expect(
        signed.headers[HTTPField.Name("Content-Security-Policy")!]?.contains("script-src 'self'")
          == true)
      // An offsite next is not followed.
      let offsite = try await client.page(
        .post, "/_wiki/_signin", as: nil,
        form: [
          "name": "alice", "password": "pw-alice", "next": "https://evil.example/", "csrf": token,
        ],
        headers: jar)
      #expect(offsite.headers[.location] == "/_wiki/")
    }
  }

  @Test(
    "a non-member never sees a wiki: absent from the list, 404 like a missing one, no title anywhere"
  )
  func hidden() async throws {
    let fixture = try UIFixture()
    try await fixture.withServer { client in
      let list = try await client.page(.get, "/_wiki/", as: "carol")
      #expect(list.text.contains("Carol&#39;s") || list.text.contains("Carol's"))
      #expect(!list.text.contains("Secret w1"))
      for uri in [
        "/_wiki/w1/", "/_wiki/w1/Home", "/_wiki/w1/Home?action=history",
        "/_wiki/w1/Home?action=blame", "/_wiki/w1/Home?action=edit", "/_wiki/w1/?action=settings",
        "/_wiki/w1/?action=conflicts", "/_wiki/w1/Home?as_of=3", "/_wiki/nowhere/",
      ] {
        let page = try await client.page(.get, uri, as: "carol")
        #expect(page.status == 404, "\(uri)")
        #expect(page.text.contains(#"id="not-found""#), "\(uri)")
        #expect(!page.text.contains("Secret") && !page.text.contains("Home\nSee"), "\(uri)")
      }
      let recent = try await client.page(.get, "/_wiki/_recent", as: "carol")
      #expect(!recent.text.contains("w1"))
      // A member sees it.
      #expect(try await client.page(.get, "/_wiki/w1/Home", as: "bob").status == 200)
    }
  }

  @Test(
    "a page: rendered Markdown, wiki links to existing and missing pages, backlinks, 404 offers to create"
  )
  func pageView() async throws {
    let fixture = try UIFixture()
    try await fixture.withServer { client in
      let home = try await client.page(.get, "/_wiki/w1/Home", as: "alice")
      #expect(home.status == 200)
      #expect(home.text.contains("<h1>Home</h1>"))
      #expect(home.text.contains(#"href="/_wiki/w1/Other""#))
      #expect(home.text.contains("missing-page"))
      #expect(home.text.contains(#"href="/_wiki/w1/Missing?action=edit""#))
      let other = try await client.page(.get, "/_wiki/w1/Other", as: "alice")
      #expect(other.text.contains(#"id="backlinks""#) && other.text.contains(">Home</a>"))
      let missing = try await client.page(.get, "/_wiki/w1/Missing", as: "alice")
      #expect(missing.status == 404)
      #expect(missing.text.contains(#"id="create-page""#))
    }
  }

  @Test(
    "one h1 a page: a Markdown opening with its only # heading has it as the h1, any other the title; the editor's own h1 is its only one"
  )
  func oneHeadingAPage() async throws {
    let fixture = try UIFixture()
    try await fixture.withServer { client in
      func h1s(_ text: String) -> Int { text.components(separatedBy: "<h1").count - 1 }
      // Home is "# Home\n…": its heading is the page's h1, the title above it is not a heading.
      let home = try await client.page(.get, "/_wiki/w1/Home", as: "alice")
      #expect(h1s(home.text) == 1)
      #expect(home.text.contains(#"<p class="page-title">Home</p>"#))
      // Other has no heading: its title is the h1.
      let other = try await client.page(.get, "/_wiki/w1/Other", as: "alice")
      #expect(h1s(other.text) == 1 && other.text.contains(#"<h1 class="page-title">Other</h1>"#))
      // The editor: "Editing Home" is the h1; the preview's headings are one level down.
      let edit = try await client.page(.get, "/_wiki/w1/Home?action=edit", as: "alice")
      #expect(h1s(edit.text) == 1 && edit.text.contains("<h2>Home</h2>"))
      #expect(edit.text.contains(#"<label for="markdown""#))
      // Two # headings: the title is the h1, the Markdown's headings one level down.
      try fixture.store.put(
        ##"{"type":"page","wiki_id":"w1","markdown":"# One\n\ntext\n\n# Two\n\n###### Six"}"##,
        id: "w1:Twice", actor: "alice")
      let twice = try await client.page(.get, "/_wiki/w1/Twice", as: "alice")
      #expect(h1s(twice.text) == 1 && twice.text.contains(#"<h1 class="page-title">Twice</h1>"#))
      #expect(twice.text.contains("<h2>One</h2>") && twice.text.contains("<h2>Two</h2>"))
      #expect(twice.text.contains("<h6>Six</h6>"))
    }
  }

  @Test(
    "without access rules the security object decides: a signed-in non-member sees no wiki, an administrator every one"
  )
  func noRules() async throws {
    let fixture = try UIFixture(rules: false)
    try await fixture.store.setSecurityAsync(
      SecurityObject(members: .init(names: ["bob"])), actor: "admin")
    try await fixture.withServer { client in
      let outsider = try await client.page(.get, "/_wiki/", as: "alice")
      #expect(outsider.status == 403)
      #expect(!outsider.text.contains("Secret w1"))
      let recent = try await client.page(.get, "/_wiki/_recent", as: "alice")
      #expect(recent.status == 403)
      let hidden = try await client.page(.get, "/_wiki/w1/Home", as: "alice")
      #expect(hidden.status == 404)
      let member = try await client.page(.get, "/_wiki/", as: "bob")
      #expect(member.status == 200)
      #expect(member.text.contains("Secret w1") && member.text.contains("Carol&#39;s"))
      let admin = try await client.page(.get, "/_wiki/", as: "admin")
      #expect(admin.status == 200 && admin.text.contains("Secret w1"))
    }
  }

  @Test(
    "search: ranked pages of my wikis with marked snippets and their last change; a hidden wiki's words never match"
  )
  func search() async throws {
    let fixture = try UIFixture()
    try fixture.store.put(
      #"{"type":"page","wiki_id":"w2","markdown":"carol keeps a secret recipe here"}"#,
      id: "w2:Recipes", actor: "carol")
    try await fixture.withServer { client in
      let home = try await client.page(.get, "/_wiki/w1/Home", as: "alice")
      #expect(home.text.contains(#"<form id="search""#))
      #expect(home.text.contains(#"<input type="hidden" name="wiki" value="w1">"#))
      let found = try await client.page(.get, "/_wiki/_search?q=text", as: "alice")
      #expect(found.status == 200)
      #expect(found.text.contains(#"href="/_wiki/w1/Other""#))
      #expect(found.text.contains("<mark>text</mark>"))
      #expect(found.text.contains("1 page in your wikis"))
      #expect(found.text.contains("bob <time datetime="))
      // carol's wiki is hidden from alice: its words do not match for her.
      let hidden = try await client.page(.get, "/_wiki/_search?q=secret+recipe", as: "alice")
      #expect(hidden.text.contains("0 pages in your wikis"))
      #expect(!hidden.text.contains("Recipes"))
      let carols = try await client.page(.get, "/_wiki/_search?q=secret", as: "carol")
      #expect(carols.text.contains(#"href="/_wiki/w2/Recipes""#))
      #expect(!carols.text.contains("w1/Other"))
      let notHers = try await client.page(.get, "/_wiki/_search?q=text&wiki=w1", as: "carol")
      #expect(notHers.status == 404)
      // One wiki; and from a page as of a moment, the search says it is of the present.
      let inWiki = try await client.page(.get, "/_wiki/_search?q=see&wiki=w1", as: "alice")
      #expect(inWiki.text.contains(#"href="/_wiki/w1/Home""#))
      #expect(inWiki.text.contains("in Secret w1"))
      let past = try await client.page(.get, "/_wiki/_search?q=text&as_of=1", as: "alice")
      #expect(past.text.contains(#"id="search-present""#))
      let empty = try await client.page(.get, "/_wiki/_search?q=", as: "alice")
      #expect(empty.status == 200 && !empty.text.contains(#"id="results""#))
    }
  }

  @Test("search snippets quote the page as read: no Markdown, wiki links as their labels")
  func renderedSnippets() async throws {
    let fixture = try UIFixture()
    try fixture.store.put(
      ###"{"type":"page","wiki_id":"w1","markdown":"## Rota\n\n| day | who |\n| --- | --- |\n| monday | **zebedee** |\n\nAsk [[Home|the front desk]] or run `rota --zebedee`."}"###,
      id: "w1:Rota", actor: "alice")
    try await fixture.withServer { client in
      let found = try await client.page(.get, "/_wiki/_search?q=zebedee", as: "alice")
      #expect(found.status == 200)
      #expect(found.text.contains(#"href="/_wiki/w1/Rota""#))
      #expect(
        found.text.contains(
          "Rota day who monday <mark>zebedee</mark> Ask the front desk or run rota --<mark>zebedee</mark>."
        ), "\(found.text)")
      #expect(!found.text.contains("[[Home"))
      #expect(!found.text.contains("| monday"))
    }
  }

  @Test(
    "pictures and files: a page lists its attachments, Markdown images and links that name one resolve to it, an old revision shows the files it had"
  )
  func pageFiles() async throws {
    let fixture = try UIFixture()
    let before = try fixture.store.get("w1:Home")["_rev"]?.stringValue ?? ""
    let withText =
      try fixture.store.put(
        #"{"type":"page","wiki_id":"w1","markdown":"![the plan](plan.png) and [notes](notes.txt) and [site](https://example.com/plan.png)"}"#,
        id: "w1:Home", rev: before, actor: "alice"
      ).rev ?? ""
    try await fixture.withServer { client in
      var headers = HTTPFields()
      headers[.authorization] = "Basic " + Data("alice:pw-alice".utf8).base64EncodedString()
      headers[.contentType] = "image/png"
      let png: [UInt8] =
        [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + Array(repeating: 7, count: 2000)
      let put = try await client.execute(
        uri: "/wiki/w1:Home/plan.png?rev=\(withText)", method: .put, headers: headers,
        body: ByteBuffer(bytes: png)
      ) { (Int($0.status.code), String(buffer: $0.body)) }
      #expect(put.0 == 201, "\(put.1)")
      let page = try await client.page(.get, "/_wiki/w1/Home", as: "alice")
      #expect(page.text.contains(#"<img src="/wiki/w1%3AHome/plan.png" alt="the plan""#))
      #expect(page.text.contains(#"href="notes.txt""#))  // no such file: left as written
      #expect(page.text.contains(#"href="https://example.com/plan.png""#))
      #expect(page.text.contains(#"<section id="files">"#))
      #expect(page.text.contains("image/png · 2 KB"))
      let edit = try await client.page(.get, "/_wiki/w1/Home?action=edit", as: "alice")
      #expect(edit.text.contains(#"data-upload="/wiki/w1%3AHome""#))
      #expect(edit.text.contains(#"<img src="/wiki/w1%3AHome/plan.png""#))
      // The revision before the file: no files, the image left as written.
      let old = try await client.page(.get, "/_wiki/w1/Home?rev=\(withText)", as: "alice")
      #expect(!old.text.contains(#"<section id="files">"#))
      #expect(old.text.contains(#"<img src="plan.png""#))
      // A new page has nothing to attach to until it is published.
      let new = try await client.page(.get, "/_wiki/w1/Fresh?action=edit", as: "alice")
      #expect(new.text.contains("Publish the page once to attach files"))
      #expect(!new.text.contains("data-upload"))
    }
  }

  @Test("forms need the CSRF token and this site's Origin")
  func csrf() async throws {
    let fixture = try UIFixture()
    try await fixture.withServer { client in
      let noToken = try await client.page(.post, "/_wiki/", as: "alice", form: ["title": "X"])
      #expect(noToken.status == 403)
      let token = try #require(try await client.page(.get, "/_wiki/", as: "alice").csrf)
      let offsite = try await client.page(
        .post, "/_wiki/", as: "alice", form: ["title": "X", "csrf": token],
        headers: [.origin: "https://evil.example"])
      #expect(offsite.status == 403)
      let made = try await client.page(
        .post, "/_wiki/", as: "alice", form: ["title": "Fresh Wiki", "csrf": token])
      #expect(made.status == 303)
      let location = try #require(made.headers[.location])
      #expect(location.hasPrefix("/_wiki/fresh-wiki-"))
      let id = String(location.dropFirst("/_wiki/".count).dropLast())
      let doc = try fixture.store.get(id)
      #expect(doc["owner_id"]?.stringValue == "alice")
      #expect(doc["title"]?.stringValue == "Fresh Wiki")
      // Another user's token does not do.
      let bobs = try #require(try await client.page(.get, "/_wiki/", as: "bob").csrf)
      #expect(bobs != token)
      let crossed = try await client.page(
        .post, "/_wiki/", as: "alice", form: ["title": "Y", "csrf": bobs])
      #expect(crossed.status == 403)
    }
  }

  @Test(
    "edit: autosave keeps a private draft, publish writes the page as the user, history and blame show it"
  )
  func editFlow() async throws {
    let fixture = try UIFixture()
    try await fixture.withServer { client in
      let edit = try await client.page(.get, "/_wiki/w1/Home?action=edit", as: "bob")
      let token = try #require(edit.csrf)
      let base = try #require(
        edit.text.firstMatch(of: #/name="base" value="([^"]*)"/#).map { String($0.1) })
      let autosave = try await client.page(
        .post, "/_wiki/w1/Home?action=autosave", as: "bob",
        form: ["markdown": "# Home\nbob's draft", "base": base, "csrf": token])
      #expect(autosave.status == 200)
      #expect(autosave.text.contains("saved_at"))
      // The draft is bob's alone, and not in the page.
      #expect(
        try Drafts(fixture.store).draft(of: "bob", page: "w1:Home")?.markdown
          == "# Home\nbob's draft")
      #expect(try fixture.store.get("w1:Home")["markdown"]?.stringValue?.contains("draft") == false)
      let again = try await client.page(.get, "/_wiki/w1/Home?action=edit", as: "bob")
      #expect(again.text.contains("bob&#39;s draft") || again.text.contains("bob's draft"))
      #expect(again.text.contains("Your draft"))
      let aliceEdit = try await client.page(.get, "/_wiki/w1/Home?action=edit", as: "alice")
      #expect(
        !aliceEdit.text.contains("bob&#39;s draft") && !aliceEdit.text.contains("bob's draft"))
      let published = try await client.page(
        .post, "/_wiki/w1/Home?action=publish", as: "bob",
        form: ["markdown": "# Home\nbob's text\n", "base": base, "csrf": token])
      #expect(published.status == 303)
      #expect(try fixture.store.get("w1:Home")["markdown"]?.stringValue == "# Home\nbob's text\n")
      #expect(try Drafts(fixture.store).draft(of: "bob", page: "w1:Home") == nil)
      let history = try await client.page(.get, "/_wiki/w1/Home?action=history", as: "alice")
      #expect(history.text.components(separatedBy: "class=\"revision\"").count == 3)
      #expect(history.text.contains(">bob</span>"))
      #expect(history.text.contains("+bob"))
      let blame = try await client.page(.get, "/_wiki/w1/Home?action=blame", as: "alice")
      #expect(blame.text.contains(#"<td class="author">alice</td>"#))  // "# Home" is alice's
      #expect(blame.text.contains(#"<td class="author">bob</td>"#))
      // A page that did not exist: publishing creates it.
      let created = try await client.page(
        .post, "/_wiki/w1/Missing?action=publish", as: "bob",
        form: ["markdown": "now here", "base": "", "csrf": token])
      #expect(created.status == 303)
      #expect(try fixture.store.get("w1:Missing")["markdown"]?.stringValue == "now here")
    }
  }

  @Test(
    "conflict markers are never published; the editor shows each change to settle, not Markdown")
  func conflictMarkers() async throws {
    let fixture = try UIFixture()
    try await fixture.withServer { client in
      let edit = try await client.page(.get, "/_wiki/w1/Home?action=edit", as: "bob")
      let token = try #require(edit.csrf)
      let before = try fixture.store.get("w1:Home")["markdown"]?.stringValue
      let marked =
        "# Home\n<<<<<<< draft\nmine\n||||||| base\nold\n=======\ntheirs\n>>>>>>> 2-abc\nend"
      let refused = try await client.page(
        .post, "/_wiki/w1/Home?action=publish", as: "bob",
        form: ["markdown": marked, "base": "", "csrf": token])
      #expect(refused.status == 409)
      #expect(refused.text.contains("conflict markers"))
      #expect(try fixture.store.get("w1:Home")["markdown"]?.stringValue == before)
      // The text is kept, as bob's draft, and the preview shows the change's three versions.
      #expect(try Drafts(fixture.store).draft(of: "bob", page: "w1:Home")?.markdown == marked)
      #expect(refused.text.contains(#"class="hunk""#))
      #expect(refused.text.contains(#"data-choice="theirs""#))
      #expect(!refused.text.contains("<h2>=======") && !refused.text.contains("<blockquote>"))
      let preview = try await client.page(
        .post, "/_wiki/w1/Home?action=preview", as: "bob",
        form: ["markdown": marked, "csrf": token])
      #expect(preview.text.contains(#"class="hunk""#) && !preview.text.contains("<blockquote>"))
    }
  }

  @Test("a title too long for a draft is refused before typing, in the app's own page")
  func longTitle() async throws {
    let fixture = try UIFixture()
    try await fixture.withServer { client in
      let wiki = try await client.page(.get, "/_wiki/w1/", as: "bob")
      let limit = Drafts.maxTitleBytes(user: "bob", wiki: "w1")
      #expect(wiki.text.contains(#"maxlength="\#(limit)""#))
      let long = String(repeating: "x", count: 600)
      let refused = try await client.page(.get, "/_wiki/w1/\(long)?action=edit", as: "bob")
      #expect(refused.status == 400)
      #expect(refused.text.contains("at most \(limit) bytes"))
      #expect(refused.text.contains("<header"))  // in the app's frame
      let fits = String(repeating: "y", count: limit)
      #expect(try await client.page(.get, "/_wiki/w1/\(fits)?action=edit", as: "bob").status == 200)
    }
  }

  @Test("the page's script gets 401 JSON, not the sign-in page, once the session has ended")
  func scriptSignedOut() async throws {
    let fixture = try UIFixture()
    try await fixture.withServer { client in
      let answer = try await client.page(
        .post, "/_wiki/w1/Home?action=autosave", as: nil,
        form: ["markdown": "x", "csrf": "t"], headers: [HTTPField.Name("X-Wikilog-Script")!: "1"])
      #expect(answer.status == 401)
      #expect(answer.text.contains(#""error":"unauthorized""#))
    }
  }

  @Test("a redacted revision: the history says who redacted it and when; its text is gone")
  func redactedHistory() async throws {
    let fixture = try UIFixture()
    let first = try fixture.store.get("w1:Home")
    let rev1 = try #require(first["_rev"]?.stringValue)
    var second = try #require(first.objectValue)
    second["markdown"] = .string("# Home\nsafe text\n")
    try fixture.store.put(JSONValue.object(second).serialized(), id: "w1:Home", actor: "bob")
    _ = try await fixture.data.erase(
      .redact, [("w1:Home", [rev1])], in: "wiki", actor: "admin", reason: "a leak")
    try await fixture.withServer { client in
      let history = try await client.page(.get, "/_wiki/w1/Home?action=history", as: "alice")
      #expect(history.status == 200)
      #expect(history.text.contains("Redacted by <span class=\"author\">admin</span>"))
      #expect(history.text.contains("(a leak)"))
      if let shots = ProcessInfo.processInfo.environment["WIKILOG_SCREENSHOTS"] {
        try history.text.write(
          toFile: shots + "/redacted-history.html", atomically: true, encoding: .utf8)
      }
      #expect(!history.text.contains("?rev=\(rev1)"))
      let blame = try await client.page(.get, "/_wiki/w1/Home?action=blame", as: "alice")
      #expect(blame.status == 200)
      #expect(!blame.text.contains(rev1.prefix(10)))
      let old = try await client.page(.get, "/_wiki/w1/Home?rev=\(rev1)", as: "alice")
      #expect(old.status == 404)
      #expect(old.text.contains("was redacted"))
    }
  }

  @Test("settings: the owner changes members; a member may not")
  func settings() async throws {
    let fixture = try UIFixture()
    try await fixture.withServer { client in
      let bobView = try await client.page(.get, "/_wiki/w1/?action=settings", as: "bob")
      #expect(!bobView.text.contains(#"id="settings""#))
      let bobToken = try #require(bobView.csrf)
      let refused = try await client.page(
        .post, "/_wiki/w1/?action=settings", as: "bob",
        form: ["title": "Mine now", "members": "bob\ncarol", "csrf": bobToken])
      #expect(refused.status == 403)
      let aliceView = try await client.page(.get, "/_wiki/w1/?action=settings", as: "alice")
      #expect(aliceView.text.contains(#"id="settings""#))
      let saved = try await client.page(
        .post, "/_wiki/w1/?action=settings", as: "alice",
        form: ["title": "Secret w1", "members": "bob\ncarol", "csrf": try #require(aliceView.csrf)])
      #expect(saved.status == 303)
      #expect(try await client.page(.get, "/_wiki/w1/Home", as: "carol").status == 200)
    }
  }

  @Test("conflicts: the banner, the leaves side by side, keeping one deletes the others")
  func conflicts() async throws {
    let fixture = try UIFixture()
    let rev = try fixture.store.get("w1:Home")["_rev"]!.stringValue!
    let hash = rev.split(separator: "-")[1]
    for (leaf, text) in [("aaaa", "left text"), ("bbbb", "right text")] {
      _ = try fixture.store.bulkDocs(
        [
          try JSONValue(
            parsing:
              #"{"_id":"w1:Home","_rev":"2-\#(leaf)","_revisions":{"start":2,"ids":["\#(leaf)","\#(hash)"]},"type":"page","wiki_id":"w1","markdown":"\#(text)"}"#
          )
        ], newEdits: false, actor: "alice")
    }
    try await fixture.withServer { client in
      let page = try await client.page(.get, "/_wiki/w1/Home", as: "alice")
      #expect(page.text.contains(#"id="conflict-banner""#))
      let list = try await client.page(.get, "/_wiki/w1/?action=conflicts", as: "alice")
      #expect(list.text.contains("left text") && list.text.contains("right text"))
      let resolved = try await client.page(
        .post, "/_wiki/w1/?action=resolve", as: "alice",
        form: ["page": "w1:Home", "keep": "2-aaaa", "csrf": try #require(list.csrf)])
      #expect(resolved.status == 303)
      let after = try await client.page(.get, "/_wiki/w1/Home", as: "alice")
      #expect(!after.text.contains(#"id="conflict-banner""#))
      #expect(after.text.contains("left text"))
    }
  }

  @Test("time travel: a page as of an earlier seq, read-only with the as-of bar")
  func timeTravel() async throws {
    let fixture = try UIFixture()
    let seq = try fixture.store.info.updateSeq.rawValue
    let rev = try fixture.store.get("w1:Home")["_rev"]!.stringValue!
    try fixture.store.put(
      #"{"type":"page","wiki_id":"w1","markdown":"newer text"}"#, id: "w1:Home", rev: rev,
      actor: "alice")
    try await fixture.withServer { client in
      let then = try await client.page(.get, "/_wiki/w1/Home?as_of=\(seq)", as: "alice")
      #expect(then.status == 200)
      #expect(then.text.contains(#"id="asof-bar""#))
      #expect(then.text.contains("See") && !then.text.contains("newer text"))
      #expect(!then.text.contains(#"id="edit""#))
      let now = try await client.page(.get, "/_wiki/w1/Home", as: "alice")
      #expect(now.text.contains("newer text"))
    }
  }

  @Test("time travel: the wiki's pages as of an earlier seq, listed through a view as of then")
  func wikiAsOf() async throws {
    let fixture = try UIFixture()
    let seq = try fixture.store.info.updateSeq.rawValue
    try fixture.store.put(
      #"{"type":"page","wiki_id":"w1","markdown":"later"}"#, id: "w1:Written Later",
      actor: "alice")
    try await fixture.withServer { client in
      let then = try await client.page(.get, "/_wiki/w1/?as_of=\(seq)", as: "alice")
      #expect(then.status == 200)
      #expect(then.text.contains(#"id="asof-bar""#))
      #expect(then.text.contains("Home") && !then.text.contains("Written Later"))
      if let shots = ProcessInfo.processInfo.environment["WIKILOG_SCREENSHOTS"] {
        try then.text.write(toFile: shots + "/wiki-as-of.html", atomically: true, encoding: .utf8)
      }
      let now = try await client.page(.get, "/_wiki/w1/", as: "alice")
      #expect(now.text.contains("Written Later"))
    }
  }

  @Test("the page's last change names who wrote it in the log, not the body's updated_by claim")
  func lastChangeFromTheLog() async throws {
    let fixture = try UIFixture()
    // bob, a member, claims alice made the edit, in the future.
    try fixture.store.put(
      #"{"type":"page","wiki_id":"w1","markdown":"spoof","updated_by":"alice","updated_at":"2099-01-01T00:00:00Z"}"#,
      id: "w1:Spoof", actor: "bob")
    // A replicated revision keeps its claim, with who brought it.
    _ = try fixture.store.bulkDocs(
      [
        try JSONValue(
          parsing: Array(
            #"{"_id":"w1:Far","_rev":"1-aaaa","type":"page","wiki_id":"w1","markdown":"far","updated_by":"dora"}"#
              .utf8))
      ], newEdits: false, actor: "bob")
    try await fixture.withServer { client in
      let page = try await client.page(.get, "/_wiki/w1/Spoof", as: "alice")
      let line = page.text.firstMatch(of: #/<p id="last-change">(.*?)</p>/#).map {
        String($0.1)
      }
      #expect(line?.hasPrefix("Last changed by bob ") == true, "\(line ?? page.text)")
      #expect(line?.contains("2099") == false)
      let far = try await client.page(.get, "/_wiki/w1/Far", as: "alice")
      #expect(far.text.contains("Last changed by dora (replicated by bob)"))
    }
  }

  @Test("a form past the size the site takes is 413, not a 500 naming an internal error")
  func oversizedForm() async throws {
    let fixture = try UIFixture()
    try await fixture.withServer { client in
      var headers = HTTPFields()
      headers[.contentType] = "application/x-www-form-urlencoded"
      let big = "name=" + String(repeating: "x", count: 2 << 20)
      let r = try await client.execute(
        uri: "/_wiki/_signin", method: .post, headers: headers, body: ByteBuffer(string: big)
      ) { Page(status: Int($0.status.code), headers: $0.headers, text: String(buffer: $0.body)) }
      #expect(r.status == 413)
      #expect(!r.text.contains("NIOTooManyBytesError"))
    }
  }

  @Test("XSS through page text and titles renders inert")
  func xss() async throws {
    let fixture = try UIFixture()
    let markdown =
      #"<script>alert(1)</script> <img src=x onerror=alert(2)> [x](javascript:alert(3)) [[<b onmouseover=alert(4)>t</b>]] [[x\" onclick=\"alert(5)]]"#
    try fixture.store.put(
      JSONValue.object(
        JSONObject([
          "type": .string("page"), "wiki_id": .string("w1"), "markdown": .string(markdown),
        ])
      ).serialized(), id: "w1:<script>alert(6)</script>", actor: "alice")
    try await fixture.withServer { client in
      let uri =
        "/_wiki/w1/" + "<script>alert(6)</script>".addingPercentEncoding(
          withAllowedCharacters: .alphanumerics)!
      let page = try await client.page(.get, uri, as: "alice")
      #expect(page.status == 200)
      #expect(!page.text.contains("<script>alert"))
      #expect(!page.text.contains("javascript:"))
      #expect(page.text.range(of: #"<[^>]*\son[a-z]+\s*="#, options: .regularExpression) == nil)
      let wiki = try await client.page(.get, "/_wiki/w1/", as: "alice")
      #expect(!wiki.text.contains("<script>alert"))
    }
  }
}
