import Auth
import Foundation
import HTTPTypes
import HummingbirdTesting
import JSON
import NIOCore
import Projections
import Testing
import WikiApp

#if canImport(FoundationXML)
  import FoundationXML
#endif

/// An Atom document as XMLParser reads it: the feed's children and each entry's, by element
/// name (the text of each, and the attributes of `link` and `content`).
final class AtomReading: NSObject, XMLParserDelegate {
  struct Element {
    var name: String
    var attributes: [String: String]
    var text = ""
    var children: [Element] = []
    func child(_ name: String) -> Element? { children.first { $0.name == name } }
    func all(_ name: String) -> [Element] { children.filter { $0.name == name } }
  }

  private var stack: [Element] = []
  private(set) var root: Element?
  private(set) var namespace: String?

  static func parse(_ text: String) -> AtomReading? {
    let reading = AtomReading()
    let parser = XMLParser(data: Data(text.utf8))
    parser.shouldProcessNamespaces = true
    parser.delegate = reading
    return parser.parse() ? reading : nil
  }

  func parser(
    _ parser: XMLParser, didStartElement name: String, namespaceURI: String?,
    qualifiedName: String?, attributes: [String: String] = [:]
  ) {
    if stack.isEmpty { namespace = namespaceURI }
    stack.append(Element(name: name, attributes: attributes))
  }

  func parser(_ parser: XMLParser, foundCharacters string: String) {
    if !stack.isEmpty { stack[stack.count - 1].text += string }
  }

  func parser(
    _ parser: XMLParser, didEndElement name: String, namespaceURI: String?, qualifiedName: String?
  ) {
    let done = stack.removeLast()
    if stack.isEmpty { root = done } else { stack[stack.count - 1].children.append(done) }
  }
}

extension Page {
  /// The first feed token on the page.
  var feedToken: String? {
    text.firstMatch(of: #/wlt_[0-9a-f]{16}_[0-9a-f]{64}/#).map { String($0.0) }
  }
}

extension TestClientProtocol {
  /// Makes (or makes again) `user`'s feed token on the Settings page and returns it.
  func makeFeedToken(_ user: String) async throws -> String {
    let settings = try await page(.get, "/_wiki/_settings", as: user)
    let made = try await page(
      .post, "/_wiki/_settings", as: user,
      form: ["csrf": try #require(settings.csrf), "action": "token"])
    #expect(made.status == 303)
    let after = try await page(.get, "/_wiki/_settings?saved=token", as: user)
    #expect(after.text.contains(#"id="settings-saved""#))
    return try #require(after.feedToken)
  }
}

@Suite struct FeedsWatchTests {
  @Test(
    "a wiki's Atom feed: valid RFC 4287, one entry per edit, read with the user's feed token only"
  )
  func wikiFeed() async throws {
    let fixture = try UIFixture()
    try fixture.store.put(
      #"{"type":"page","wiki_id":"w1","markdown":"Other text, <b>changed</b> & more"}"#,
      id: "w1:Other", rev: try fixture.store.get("w1:Other")["_rev"]!.stringValue!, actor: "alice")
    try await fixture.withServer { client in
      let none = try await client.page(.get, "/_wiki/w1/", as: "alice")
      #expect(!none.text.contains("application/atom+xml\" title"))
      let token = try await client.makeFeedToken("alice")
      // The wiki's home and its recent changes advertise the feed, with the token.
      let home = try await client.page(.get, "/_wiki/w1/", as: "alice")
      #expect(
        home.text.contains(
          #"<link rel="alternate" type="application/atom+xml" title="Recent changes in Secret w1" href="/_wiki/_feed/w1?token=\#(token)">"#
        ))
      let recent = try await client.page(.get, "/_wiki/_recent?wiki=w1", as: "alice")
      #expect(recent.text.contains("/_wiki/_feed/w1?token=\(token)"))

      let feed = try await client.page(.get, "/_wiki/_feed/w1?token=\(token)", as: nil)
      #expect(feed.status == 200)
      #expect(feed.headers[.contentType]?.hasPrefix("application/atom+xml") == true)
      let reading = try #require(AtomReading.parse(feed.text))
      #expect(reading.namespace == "http://www.w3.org/2005/Atom")
      let root = try #require(reading.root)
      #expect(root.name == "feed")
      for name in ["id", "title", "updated"] {
        #expect((root.child(name)?.text ?? "").isEmpty == false, "feed has \(name)")
      }
      #expect(root.child("id")?.text.hasPrefix("urn:uuid:") == true)
      #expect(root.child("title")?.text == "Recent changes in Secret w1")
      #expect(ISO8601DateFormatter().date(from: root.child("updated")?.text ?? "") != nil)
      let selfLink = root.all("link").first { $0.attributes["rel"] == "self" }
      #expect(selfLink?.attributes["href"]?.hasSuffix("/_wiki/_feed/w1?token=\(token)") == true)
      // One entry per edit: the wiki, Home, Other and Other's second revision.
      let entries = root.all("entry")
      #expect(entries.count == 4)
      for entry in entries {
        #expect(entry.child("id")?.text.hasPrefix("urn:uuid:") == true)
        #expect((entry.child("title")?.text ?? "").isEmpty == false)
        #expect(ISO8601DateFormatter().date(from: entry.child("updated")?.text ?? "") != nil)
        #expect((entry.child("author")?.child("name")?.text ?? "").isEmpty == false)
        let link = entry.all("link").first { $0.attributes["rel"] == "alternate" }
        #expect(link?.attributes["href"]?.hasPrefix("http://") == true)
        #expect(entry.child("content")?.attributes["type"] == "html")
      }
      #expect(Set(entries.compactMap { $0.child("id")?.text }).count == 4)
      let newest = try #require(entries.first)
      #expect(newest.child("title")?.text == "Other changed by alice")
      #expect(entries.last?.child("title")?.text == "Secret w1 created by alice")
      #expect(entries[1].child("title")?.text == "Other created by bob")
      #expect(newest.child("author")?.child("name")?.text == "alice")
      // The diff, as HTML, escaped once for XML: the parser gives back the HTML, in which the
      // page's own markup is text.
      let content = newest.child("content")?.text ?? ""
      #expect(
        content.contains("<pre>") && content.contains("&lt;b&gt;changed&lt;/b&gt; &amp; more"))
      #expect(
        newest.all("link").first?.attributes["href"]?.contains("/_wiki/w1/Other?rev=2-") == true)
      // The ids stay the same from one read to the next.
      let again = try await client.page(.get, "/_wiki/_feed/w1?token=\(token)", as: nil)
      #expect(
        AtomReading.parse(again.text)?.root?.all("entry").compactMap { $0.child("id")?.text }
          == entries.compactMap { $0.child("id")?.text })

      // Wrong, missing or another kind of token: 401, nothing of the wiki.
      for uri in [
        "/_wiki/_feed/w1?token=wlt_0123456789abcdef_" + String(repeating: "0", count: 64),
        "/_wiki/_feed/w1", "/_wiki/_feed/w1?token=" + String(token.dropLast()) + "x",
      ] {
        let refused = try await client.page(.get, uri, as: nil)
        #expect(refused.status == 401, "\(uri)")
        #expect(!refused.text.contains("Secret") && !refused.text.contains("<feed"))
      }
      let api = try fixture.auth.tokens.create(user: "alice", actor: "test").token
      #expect(try await client.page(.get, "/_wiki/_feed/w1?token=\(api)", as: nil).status == 401)
      // Another user's token reads only their wikis: w1 is not carol's.
      let carols = try await client.makeFeedToken("carol")
      let hidden = try await client.page(.get, "/_wiki/_feed/w1?token=\(carols)", as: nil)
      #expect(
        hidden.status == 404 && !hidden.text.contains("Secret") && !hidden.text.contains("<feed"))
      let all = try await client.page(.get, "/_wiki/_feed?token=\(carols)", as: nil)
      #expect(all.status == 200 && !all.text.contains("Secret") && !all.text.contains("w1"))
      #expect(AtomReading.parse(all.text)?.root?.all("entry").count == 1)
      // A feed token signs nothing in: it cannot read the API, let alone write.
      let write = try await client.execute(
        uri: "/wiki/w1:Home", method: .put,
        headers: [.authorization: "Token token=\(token)", .contentType: "application/json"],
        body: .init(string: #"{"type":"page","wiki_id":"w1","markdown":"x"}"#)
      ) { Int($0.status.code) }
      #expect(write == 401)
      #expect(try fixture.store.get("w1:Home")["markdown"]?.stringValue != "x")
      // A new token revokes the old one.
      let renewed = try await client.makeFeedToken("alice")
      #expect(renewed != token)
      #expect(try await client.page(.get, "/_wiki/_feed/w1?token=\(token)", as: nil).status == 401)
      #expect(
        try await client.page(.get, "/_wiki/_feed/w1?token=\(renewed)", as: nil).status == 200)
    }
  }

  @Test("a page's history feed: each revision with its diff, a deletion, advertised on the page")
  func pageFeed() async throws {
    let fixture = try UIFixture()
    let rev = try fixture.store.get("w1:Home")["_rev"]!.stringValue!
    let second = try fixture.store.put(
      ##"{"type":"page","wiki_id":"w1","markdown":"# Home\nNew line"}"##, id: "w1:Home", rev: rev,
      actor: "bob")
    _ = try fixture.store.delete(
      "w1:Other", rev: try fixture.store.get("w1:Other")["_rev"]!.stringValue!, actor: "alice")
    try await fixture.withServer { client in
      let token = try await client.makeFeedToken("bob")
      let page = try await client.page(.get, "/_wiki/w1/Home", as: "bob")
      #expect(
        page.text.contains(
          #"<link rel="alternate" type="application/atom+xml" title="History of Home" href="/_wiki/_feed/w1/Home?token=\#(token)">"#
        ))
      let feed = try await client.page(.get, "/_wiki/_feed/w1/Home?token=\(token)", as: nil)
      let root = try #require(AtomReading.parse(feed.text)?.root)
      #expect(root.child("title")?.text == "History of Home (Secret w1)")
      let entries = root.all("entry")
      #expect(entries.count == 2)
      #expect(entries.first?.child("author")?.child("name")?.text == "bob")
      #expect(entries.first?.child("content")?.text.contains("+New line") == true)
      #expect(
        entries.first?.all("link").first?.attributes["href"]?.hasSuffix(
          "/_wiki/w1/Home?rev=\(second.rev ?? "")") == true)
      let deleted = try await client.page(.get, "/_wiki/_feed/w1/Other?token=\(token)", as: nil)
      let newest = AtomReading.parse(deleted.text)?.root?.all("entry").first
      #expect(newest?.child("title")?.text == "Other deleted by alice")
      #expect(
        newest?.all("link").first?.attributes["href"]?.hasSuffix("/_wiki/w1/Other?action=history")
          == true)
      #expect(
        try await client.page(.get, "/_wiki/_feed/w1/Nowhere?token=\(token)", as: nil).status == 404
      )
    }
  }

  @Test("recent changes: one row per edit with its revision and diff, deletions, a wiki's own list")
  func recentPerEdit() async throws {
    let fixture = try UIFixture()
    var rev = try fixture.store.get("w1:Home")["_rev"]!.stringValue!
    for text in ["one", "two"] {
      rev =
        try fixture.store.put(
          #"{"type":"page","wiki_id":"w1","markdown":"\#(text)"}"#, id: "w1:Home", rev: rev,
          actor: "bob"
        ).rev ?? ""
    }
    _ = try fixture.store.delete(
      "w1:Other", rev: try fixture.store.get("w1:Other")["_rev"]!.stringValue!, actor: "alice")
    try fixture.store.put(
      #"{"type":"page","wiki_id":"w2","markdown":"c"}"#, id: "w2:C", actor: "carol")
    try await fixture.withServer { client in
      let recent = try await client.page(.get, "/_wiki/_recent?wiki=w1", as: "alice")
      #expect(recent.status == 200)
      #expect(recent.text.contains("<h1>Recent changes in Secret w1</h1>"))
      let homeRows = recent.text.matches(of: #/href="/_wiki/w1/Home\?rev=/#).count
      #expect(homeRows == 3)
      #expect(
        recent.text.matches(of: #/class="diff" href="/_wiki/w1/Home\?action=history"/#).count == 3)
      #expect(
        recent.text.contains(
          #"<li class="edit deleted"><a href="/_wiki/w1/Other">Other</a> <strong class="deleted-mark">deleted</strong>"#
        ))
      #expect(!recent.text.contains("w2:C") && !recent.text.contains("/_wiki/w2/"))
      // The wiki's home links its own list.
      let home = try await client.page(.get, "/_wiki/w1/", as: "alice")
      #expect(home.text.contains(#"id="recent" href="/_wiki/_recent?wiki=w1""#))
      // Another's wiki: the same 404 as none.
      let hidden = try await client.page(.get, "/_wiki/_recent?wiki=w2", as: "alice")
      #expect(hidden.status == 404 && !hidden.text.contains("Carol"))
      let none = try await client.page(.get, "/_wiki/_recent?wiki=nope", as: "alice")
      #expect(none.status == 404)
      // The list of every wiki: alice's only.
      let all = try await client.page(.get, "/_wiki/_recent", as: "alice")
      #expect(all.text.matches(of: #/href="/_wiki/w1/Home\?rev=/#).count == 3)
      #expect(!all.text.contains("/_wiki/w2/"))
    }
  }

  @Test(
    "watch a page and a wiki: My wikis shows the changes since the user last looked, only what they may read"
  )
  func watchList() async throws {
    let fixture = try UIFixture()
    try await fixture.withServer { client in
      let page = try await client.page(.get, "/_wiki/w1/Home", as: "bob")
      #expect(page.text.contains(#"<button id="watch" type="submit" name="action" value="watch""#))
      let csrf = try #require(page.csrf)
      let watched = try await client.page(
        .post, "/_wiki/_watch", as: "bob",
        form: ["csrf": csrf, "action": "watch", "id": "w1:Home", "back": "/_wiki/w1/Home"])
      #expect(watched.status == 303 && watched.headers[.location] == "/_wiki/w1/Home")
      let again = try await client.page(.get, "/_wiki/w1/Home", as: "bob")
      #expect(again.text.contains("Stop watching this page"))
      // alice does not see bob's watch.
      #expect(
        try await client.page(.get, "/_wiki/w1/Home", as: "alice").text.contains("Watch this page"))
      let before = try await client.page(.get, "/_wiki/", as: "bob")
      #expect(before.text.contains("Nothing new in what you watch."))
      // alice changes the page; Other changes too, which bob does not watch.
      let rev = try fixture.store.get("w1:Home")["_rev"]!.stringValue!
      let edit = try fixture.store.put(
        #"{"type":"page","wiki_id":"w1","markdown":"changed"}"#, id: "w1:Home", rev: rev,
        actor: "alice")
      try fixture.store.put(
        #"{"type":"page","wiki_id":"w1","markdown":"o2"}"#, id: "w1:Other",
        rev: try fixture.store.get("w1:Other")["_rev"]!.stringValue!, actor: "alice")
      let after = try await client.page(.get, "/_wiki/", as: "bob")
      #expect(after.text.contains(#"<ol id="watch-changes">"#))
      #expect(after.text.contains(#"href="/_wiki/w1/Home?rev=\#(edit.rev ?? "")""#))
      #expect(after.text.contains(#"class="diff" href="/_wiki/w1/Home?action=history""#))
      #expect(after.text.contains("Secret w1 · alice"))
      #expect(!after.text.contains("/_wiki/w1/Other?rev="))
      // Marked as seen: nothing new until the next change.
      let seen = try await client.page(
        .post, "/_wiki/_watch", as: "bob",
        form: ["csrf": csrf, "action": "seen", "back": "/_wiki/"])
      #expect(seen.status == 303)
      #expect(
        try await client.page(.get, "/_wiki/", as: "bob").text.contains(
          "Nothing new in what you watch."))
      // The whole wiki, watched from its home: Other's next change shows.
      let wikiHome = try await client.page(.get, "/_wiki/w1/", as: "bob")
      #expect(wikiHome.text.contains("Watch this wiki"))
      _ = try await client.page(
        .post, "/_wiki/_watch", as: "bob",
        form: ["csrf": csrf, "action": "watch", "id": "w1", "back": "/_wiki/w1/"])
      try fixture.store.put(
        #"{"type":"page","wiki_id":"w1","markdown":"o3"}"#, id: "w1:Other",
        rev: try fixture.store.get("w1:Other")["_rev"]!.stringValue!, actor: "alice")
      let wikiNews = try await client.page(.get, "/_wiki/", as: "bob")
      #expect(wikiNews.text.contains("/_wiki/w1/Other?rev=3-"))
      // carol may not watch w1 (the same 404 as no wiki), and writes nothing.
      let carol = try await client.page(.get, "/_wiki/", as: "carol")
      let refused = try await client.page(
        .post, "/_wiki/_watch", as: "carol",
        form: [
          "csrf": try #require(carol.csrf), "action": "watch", "id": "w1:Home", "back": "/_wiki/",
        ])
      #expect(refused.status == 404 && !refused.text.contains("Secret"))
      #expect(throws: StoreError.self) {
        try fixture.store.getLocal("org.wikilog.watch.6361726f6c")
      }
      // A post without the form's token writes nothing.
      let forged = try await client.page(
        .post, "/_wiki/_watch", as: "bob",
        form: ["action": "unwatch", "id": "w1", "back": "/_wiki/"])
      #expect(forged.status == 403)
      // bob leaves w1: nothing of it shows any more, though he still watches it.
      let alice = try await client.page(.get, "/_wiki/w1/?action=settings", as: "alice")
      let saved = try await client.page(
        .post, "/_wiki/w1/?action=settings", as: "alice",
        form: ["title": "Secret w1", "members": "", "csrf": try #require(alice.csrf)])
      #expect(saved.status == 303)
      let gone = try await client.page(.get, "/_wiki/", as: "bob")
      #expect(!gone.text.contains("Secret w1") && !gone.text.contains("/_wiki/w1/"))
    }
  }

  @Test("settings of a wiki: members must be users, saving says so, duplicate titles refused")
  func wikiSettingsChecks() async throws {
    let fixture = try UIFixture()
    try await fixture.withServer { client in
      let view = try await client.page(.get, "/_wiki/w1/?action=settings", as: "alice")
      let csrf = try #require(view.csrf)
      let typo = try await client.page(
        .post, "/_wiki/w1/?action=settings", as: "alice",
        form: ["title": "Secret w1", "members": "bob\nbobb", "csrf": csrf])
      #expect(typo.status == 400)
      #expect(
        typo.text.contains("There is no user called “bobb”") && typo.text.contains(#"id="user""#))
      #expect(try fixture.store.get("w1")["members"] == .array([.string("bob")]))
      let saved = try await client.page(
        .post, "/_wiki/w1/?action=settings", as: "alice",
        form: ["title": "Secret w1", "members": "bob\ncarol", "csrf": csrf])
      #expect(saved.headers[.location] == "/_wiki/w1/?action=settings&saved=1")
      let said = try await client.page(.get, "/_wiki/w1/?action=settings&saved=1", as: "alice")
      #expect(said.text.contains("Settings saved."))
      // Duplicate titles: a new wiki, and a rename.
      let dup = try await client.page(
        .post, "/_wiki/", as: "alice", form: ["title": " secret W1 ", "csrf": csrf])
      #expect(dup.status == 400 && dup.text.contains("already in your wikis"))
      let made = try await client.page(
        .post, "/_wiki/", as: "alice", form: ["title": "Mine", "csrf": csrf])
      #expect(made.status == 303)
      let mine = try #require(made.headers[.location])
      let rename = try await client.page(.get, mine + "?action=settings", as: "alice")
      let refused = try await client.page(
        .post, mine + "?action=settings", as: "alice",
        form: ["title": "Secret W1", "members": "", "csrf": csrf, "rev": ""])
      #expect(refused.status == 400 && rename.status == 200)
      // carol's wiki has a title alice cannot see: hers does not count.
      let carols = try await client.page(
        .post, "/_wiki/", as: "alice", form: ["title": "Carol's", "csrf": csrf])
      #expect(carols.status == 303)
    }
  }

  @Test("change one's password: the current one required, the new one twice; a fresh cookie")
  func changePassword() async throws {
    let fixture = try UIFixture()
    try await fixture.withServer { client in
      let page = try await client.page(.get, "/_wiki/_settings", as: "bob")
      #expect(page.status == 200 && page.text.contains(#"id="password-form""#))
      let csrf = try #require(page.csrf)
      func change(_ old: String, _ new: String, _ again: String) async throws -> Page {
        try await client.page(
          .post, "/_wiki/_settings", as: "bob",
          form: [
            "csrf": csrf, "action": "password", "old_password": old, "new_password": new,
            "new_password2": again,
          ])
      }
      let wrongOld = try await change("nope", "new-secret-1", "new-secret-1")
      #expect(
        wrongOld.status == 400 && wrongOld.text.contains("Your current password is not that one"))
      let differ = try await change("pw-bob", "new-secret-1", "new-secret-2")
      #expect(differ.status == 400 && differ.text.contains("differ"))
      let short = try await change("pw-bob", "short", "short")
      #expect(short.status == 400)
      #expect(try fixture.auth.checkPassword(name: "bob", password: "pw-bob") != nil)
      let changed = try await change("pw-bob", "new-secret-1", "new-secret-1")
      #expect(changed.status == 303)
      #expect(changed.headers[.location] == "/_wiki/_settings?saved=password")
      #expect(changed.headers[.setCookie]?.hasPrefix("AuthSession=") == true)
      #expect(try fixture.auth.checkPassword(name: "bob", password: "pw-bob") == nil)
      #expect(try fixture.auth.checkPassword(name: "bob", password: "new-secret-1") != nil)
      // Without a form token nothing changes.
      let forged = try await client.page(
        .post, "/_wiki/_settings", as: nil,
        form: ["action": "password", "old_password": "new-secret-1", "new_password": "x"])
      #expect(forged.status == 303 || forged.status == 403)
      #expect(try fixture.auth.checkPassword(name: "bob", password: "new-secret-1") != nil)
    }
  }
}

@Suite struct UserAdminTests {
  @Test("administrators list and remove users (asked first, not themselves); others may not")
  func listAndRemove() async throws {
    let fixture = try UIFixture()
    try await fixture.withServer { client in
      let refused = try await client.page(.get, "/_wiki/_users", as: "alice")
      #expect(refused.status == 403 && !refused.text.contains("carol"))
      let alice = try await client.page(.get, "/_wiki/_settings", as: "alice")
      let forbidden = try await client.page(
        .post, "/_wiki/_users", as: "alice",
        form: [
          "csrf": try #require(alice.csrf), "action": "remove", "name": "carol",
          "confirm": "yes",
        ])
      #expect(forbidden.status == 403)
      #expect(try fixture.auth.users.user(named: "carol") != nil)
      let list = try await client.page(.get, "/_wiki/_users", as: "admin")
      #expect(list.status == 200)
      for name in ["admin", "alice", "bob", "carol"] { #expect(list.text.contains(">\(name)")) }
      let csrf = try #require(list.csrf)
      let ask = try await client.page(
        .post, "/_wiki/_users", as: "admin",
        form: ["csrf": csrf, "action": "remove", "name": "carol"])
      #expect(ask.status == 200 && ask.text.contains("Remove the user carol?"))
      #expect(try fixture.auth.users.user(named: "carol") != nil)
      let yourself = try await client.page(
        .post, "/_wiki/_users", as: "admin",
        form: ["csrf": csrf, "action": "remove", "name": "admin", "confirm": "yes"])
      #expect(yourself.status == 400)
      let noToken = try await client.page(
        .post, "/_wiki/_users", as: "admin",
        form: ["action": "remove", "name": "carol", "confirm": "yes"])
      #expect(noToken.status == 403)
      let removed = try await client.page(
        .post, "/_wiki/_users", as: "admin",
        form: ["csrf": csrf, "action": "remove", "name": "carol", "confirm": "yes"])
      #expect(removed.status == 303)
      #expect(try fixture.auth.users.user(named: "carol") == nil)
      #expect(try await client.page(.get, "/_wiki/", as: "carol").status == 303)
    }
  }

  @Test(
    "disable: a disabled user signs in no way (password, an earlier session, an API token) and is told why; only administrators disable or enable; enabling lets them in again"
  )
  func disableAndEnable() async throws {
    let fixture = try UIFixture()
    try await fixture.withServer { client in
      // carol's session and API token, made while she is enabled.
      let session = try await fixture.auth.signIn(name: "carol", password: "pw-carol", client: nil)
      let cookie: HTTPFields = [.cookie: String(session.setCookie.prefix { $0 != ";" })]
      #expect(try await client.page(.get, "/_wiki/", as: nil, headers: cookie).status == 200)
      let token = try fixture.auth.tokens.create(user: "carol", label: "cli", actor: "carol").token
      let tokenHeader: HTTPFields = [.authorization: "Token \(token)"]
      #expect(try await client.page(.get, "/_session", as: nil, headers: tokenHeader).status == 200)

      // Only administrators disable, and not themselves.
      let alice = try await client.page(.get, "/_wiki/_settings", as: "alice")
      let refused = try await client.page(
        .post, "/_wiki/_users", as: "alice",
        form: ["csrf": try #require(alice.csrf), "action": "disable", "name": "carol"])
      #expect(refused.status == 403)
      #expect(try fixture.auth.users.user(named: "carol")?.isDisabled == false)
      let list = try await client.page(.get, "/_wiki/_users", as: "admin")
      let csrf = try #require(list.csrf)
      #expect(list.text.contains(#"aria-label="Disable carol""#))
      let yourself = try await client.page(
        .post, "/_wiki/_users", as: "admin",
        form: ["csrf": csrf, "action": "disable", "name": "admin"])
      #expect(yourself.status == 400 && yourself.text.contains("cannot disable yourself"))
      let done = try await client.page(
        .post, "/_wiki/_users", as: "admin",
        form: ["csrf": csrf, "action": "disable", "name": "carol"])
      #expect(done.status == 200 && done.text.contains("carol is disabled"))
      #expect(done.text.contains(#"aria-label="Enable carol""#))
      #expect(try fixture.auth.users.user(named: "carol")?.isDisabled == true)

      // Her session, password and token no longer sign her in; the password says why.
      #expect(try await client.page(.get, "/_wiki/", as: nil, headers: cookie).status == 303)
      let basic = try await client.page(.get, "/_session", as: "carol")
      #expect(basic.status == 401 && basic.text.contains("This account is disabled"))
      let wrong: HTTPFields = [
        .authorization: "Basic " + Data("carol:nope".utf8).base64EncodedString()
      ]
      let guess = try await client.page(.get, "/_session", as: nil, headers: wrong)
      #expect(guess.status == 401 && guess.text.contains("Name or password is incorrect."))
      #expect(try await client.page(.get, "/_session", as: nil, headers: tokenHeader).status == 401)

      // A user may not change `disabled` on their own document; an administrator may.
      let own = try await client.page(.get, "/_users/org.couchdb.user:alice", as: "alice")
      var body = try #require(try JSONValue(parsing: own.text).objectValue)
      body["disabled"] = .bool(true)
      let put = try await client.execute(
        uri: "/_users/org.couchdb.user:alice", method: .put,
        headers: [
          .authorization: "Basic " + Data("alice:pw-alice".utf8).base64EncodedString(),
          .contentType: "application/json",
        ], body: ByteBuffer(bytes: JSONValue.object(body).serialized())
      ) { Int($0.status.code) }
      #expect(put == 403)
      #expect(try fixture.auth.users.user(named: "alice")?.isDisabled == false)

      // Enabled again: the same password and token work, nothing else was lost.
      let enabled = try await client.page(
        .post, "/_wiki/_users", as: "admin",
        form: ["csrf": csrf, "action": "enable", "name": "carol"])
      #expect(enabled.status == 200 && enabled.text.contains("carol is enabled"))
      #expect(try await client.page(.get, "/_wiki/", as: "carol").status == 200)
      #expect(try await client.page(.get, "/_session", as: nil, headers: tokenHeader).status == 200)
    }
  }

  @Test(
    "invitations: an administrator makes a one-time link; its code stays out of the address the server sees; it makes one account, signed in, once; revoked links and bad answers make nothing"
  )
  func invitations() async throws {
    let fixture = try UIFixture()
    try await fixture.withServer { client in
      let list = try await client.page(.get, "/_wiki/_users", as: "admin")
      #expect(list.text.contains(#"id="no-invitations""#))
      let csrf = try #require(list.csrf)
      // Only administrators invite.
      let alice = try await client.page(.get, "/_wiki/_settings", as: "alice")
      let refused = try await client.page(
        .post, "/_wiki/_users", as: "alice",
        form: ["csrf": try #require(alice.csrf), "action": "invite"])
      #expect(refused.status == 403)
      #expect(try fixture.auth.invitations.list().isEmpty)

      let made = try await client.page(
        .post, "/_wiki/_users", as: "admin", form: ["csrf": csrf, "action": "invite"])
      #expect(made.status == 200)
      let link = try #require(
        made.text.firstMatch(of: #/id="invitation-link" class="token">([^<]+)</#).map {
          String($0.1)
        })
      #expect(link.contains("/_wiki/_invite#wli_"))
      let code = String(try #require(link.split(separator: "#").last))
      #expect(try fixture.auth.invitations.list().count == 1)
      let again = try await client.page(.get, "/_wiki/_users", as: "admin")
      #expect(again.text.contains(#"id="invitation-list""#) && !again.text.contains(code))

      // The form, with its CSRF cookie.
      let form = try await client.page(.get, "/_wiki/_invite", as: nil)
      #expect(form.status == 200 && form.text.contains(#"id="invite-code""#))
      let setCookie = try #require(form.headers[.setCookie])
      let token = try #require(
        setCookie.firstMatch(of: #/wikilog_invite=([0-9a-f]+)/#).map { String($0.1) })
      var cookie = HTTPFields()
      cookie[.cookie] = "wikilog_invite=\(token)"
      func accept(_ fields: [String: String], cookie: HTTPFields = cookie) async throws -> Page {
        try await client.page(
          .post, "/_wiki/_invite", as: nil, form: fields.merging(["csrf": token]) { a, _ in a },
          headers: cookie)
      }
      // Without the cookie, nothing is made.
      let forged = try await accept(
        ["code": code, "name": "dora", "password": "dora-pass-1", "password2": "dora-pass-1"],
        cookie: [:])
      #expect(forged.status == 403)
      // Passwords that differ, a short one, a name taken: told, in the frame; nothing made.
      let differ = try await accept(
        ["code": code, "name": "dora", "password": "dora-pass-1", "password2": "dora-pass-2"])
      #expect(differ.status == 400 && differ.text.contains("The two passwords differ"))
      let short = try await accept(
        ["code": code, "name": "dora", "password": "short", "password2": "short"])
      #expect(short.status == 400 && short.text.contains("at least 8 characters"))
      let taken = try await accept(
        ["code": code, "name": "carol", "password": "dora-pass-1", "password2": "dora-pass-1"])
      #expect(taken.status == 409 && taken.text.contains(#"id="invite-error""#))
      #expect(try fixture.auth.users.user(named: "dora") == nil)
      #expect(try fixture.auth.invitations.list().count == 1)
      // The right answers: the account, signed in.
      let accepted = try await accept(
        ["code": code, "name": "dora", "password": "dora-pass-1", "password2": "dora-pass-1"])
      #expect(accepted.status == 303)
      let session = try #require(accepted.headers[.setCookie])
      #expect(session.hasPrefix("AuthSession="))
      #expect(try fixture.auth.checkPassword(name: "dora", password: "dora-pass-1") != nil)
      var signedIn = HTTPFields()
      signedIn[.cookie] = String(session.prefix { $0 != ";" })
      let home = try await client.page(.get, "/_wiki/", as: nil, headers: signedIn)
      #expect(home.status == 200 && home.text.contains("dora"))
      // Once only.
      let twice = try await accept(
        ["code": code, "name": "eve", "password": "eve-pass-12", "password2": "eve-pass-12"])
      #expect(twice.status == 404 && twice.text.contains("not valid any more"))
      #expect(try fixture.auth.users.user(named: "eve") == nil)
      #expect(try fixture.auth.invitations.list().isEmpty)

      // A revoked link makes nothing.
      let second = try await client.page(
        .post, "/_wiki/_users", as: "admin", form: ["csrf": csrf, "action": "invite"])
      let secondCode = String(
        try #require(
          second.text.firstMatch(of: #/_wiki/_invite#(wli_[0-9a-f_]+)/#).map { String($0.1) }))
      let id = try #require(fixture.auth.invitations.list().first?.id)
      let revoked = try await client.page(
        .post, "/_wiki/_users", as: "admin",
        form: ["csrf": csrf, "action": "revoke-invitation", "name": id])
      #expect(revoked.status == 303)
      let late = try await accept(
        ["code": secondCode, "name": "eve", "password": "eve-pass-12", "password2": "eve-pass-12"])
      #expect(late.status == 404)
      #expect(try fixture.auth.users.user(named: "eve") == nil)
    }
  }
}
