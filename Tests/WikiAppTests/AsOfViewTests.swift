import Foundation
import HTTPTypes
import HummingbirdTesting
import JSON
import Log
import NIOCore
import Projections
import RevTree
import Testing
import Wiki

@Suite struct AsOfViewTests {
  /// The fixture, with A and B linking to Home, at the returned seq; after it: Home edited, C
  /// linking to Home, A deleted, carol made a member and a file attached to Home.
  func fixtureWithHistory(_ name: String = #function) throws -> (UIFixture, UInt64) {
    let fixture = try UIFixture(name)
    for title in ["A", "B"] {
      try fixture.store.put(
        #"{"type":"page","wiki_id":"w1","markdown":"Back to [[Home]]."}"#, id: "w1:\(title)",
        actor: "bob")
    }
    let seq = try fixture.store.info.updateSeq.rawValue
    let home = try #require(try fixture.store.get("w1:Home")["_rev"]?.stringValue)
    try fixture.store.put(
      #"{"type":"page","wiki_id":"w1","markdown":"newer text"}"#, id: "w1:Home", rev: home,
      actor: "alice")
    try fixture.store.put(
      #"{"type":"page","wiki_id":"w1","markdown":"Also [[Home]]."}"#, id: "w1:C", actor: "bob")
    let a = try #require(try fixture.store.get("w1:A")["_rev"]?.stringValue)
    _ = try fixture.store.delete("w1:A", rev: a, actor: "bob")
    let wiki = try #require(try fixture.store.get("w1").objectValue)
    var changed = wiki
    changed["members"] = .array([.string("bob"), .string("carol")])
    changed.members.removeAll { $0.key == "_id" || $0.key == "_rev" }
    try fixture.store.put(
      JSONValue.object(changed).serialized(), id: "w1", rev: wiki["_rev"]?.stringValue,
      actor: "alice")
    return (fixture, seq)
  }

  @Test(
    "a page as of a moment: its text, backlinks and links as of then, the moment as a date and an event, no form that writes"
  )
  func pageThen() async throws {
    let (fixture, seq) = try fixtureWithHistory()
    try await fixture.withServer { client in
      let live = try await client.page(.get, "/_wiki/w1/Home", as: "alice")
      #expect(live.text.contains(#"<a href="/_wiki/w1/B">B</a>"#))
      // As of the present the backlinks are today's (they were missing before).
      let now = try fixture.store.info.updateSeq.rawValue
      let present = try await client.page(.get, "/_wiki/w1/Home?as_of=\(now)", as: "alice")
      #expect(present.text.contains(#"<a href="/_wiki/w1/B?as_of=\#(now)">B</a>"#))
      #expect(present.text.contains(#"<a href="/_wiki/w1/C?as_of=\#(now)">C</a>"#))
      #expect(!present.text.contains("Nothing links here"))

      let then = try await client.page(.get, "/_wiki/w1/Home?as_of=\(seq)", as: "alice")
      #expect(then.status == 200)
      #expect(headings(then.text) == 1)
      #expect(then.text.contains("See") && !then.text.contains("newer text"))
      // What linked here then: A (deleted since) and B, not C (written since).
      #expect(then.text.contains(#"<a href="/_wiki/w1/A?as_of=\#(seq)">A</a>"#))
      #expect(then.text.contains(#"<a href="/_wiki/w1/B?as_of=\#(seq)">B</a>"#))
      #expect(!then.text.contains("/_wiki/w1/C"))
      // Links keep the moment; a page missing then is missing.
      #expect(then.text.contains(#"href="/_wiki/w1/Other?as_of=\#(seq)""#))
      #expect(then.text.contains(#"href="/_wiki/w1/Missing?as_of=\#(seq)""#))
      #expect(!then.text.contains("action=edit"))
      #expect(then.text.contains(#"<nav class="crumbs"><a href="/_wiki/w1/?as_of=\#(seq)">"#))
      #expect(then.text.contains("action=history&amp;as_of=\(seq)"))
      // The moment as a date and time, and the event.
      let bar = try #require(
        then.text.firstMatch(of: #/<div id="asof-bar"[^>]*>(.*?)</div>/#).map { String($0.1) })
      #expect(bar.contains(#"<time class="exact""#) && bar.contains(" UTC</time>, event \(seq)"))
      // No form that writes: the header's search and sign-out only.
      #expect(Set(formIDs(then.text)) == ["search", "signout"])
      #expect(!then.text.contains(#"id="edit""#) && !then.text.contains(#"id="delete""#))

      // A page deleted since shows as it was; one written since did not exist then.
      let a = try await client.page(.get, "/_wiki/w1/A?as_of=\(seq)", as: "alice")
      #expect(a.status == 200 && a.text.contains("Back to"))
      let c = try await client.page(.get, "/_wiki/w1/C?as_of=\(seq)", as: "alice")
      #expect(c.status == 404 && c.text.contains("did not exist then"))
      #expect(c.text.contains(#"id="asof-bar""#))
      let aNow = try await client.page(.get, "/_wiki/w1/A?as_of=\(now)", as: "alice")
      #expect(aNow.status == 404 && aNow.text.contains("had been deleted by then"))

      // History and blame as of then.
      let history = try await client.page(
        .get, "/_wiki/w1/Home?action=history&as_of=\(seq)", as: "alice")
      #expect(history.text.components(separatedBy: "class=\"revision").count == 2)
      #expect(history.text.contains(#"id="asof-bar""#))
      let blame = try await client.page(
        .get, "/_wiki/w1/Home?action=blame&as_of=\(seq)", as: "alice")
      #expect(blame.text.contains("See [[Other]]") && !blame.text.contains("newer text"))
      // carol, a member only since, sees the past of the wiki she is in now; alice's other
      // wikis stay hidden from her.
      let carols = try await client.page(.get, "/_wiki/w1/Home?as_of=\(seq)", as: "carol")
      #expect(carols.status == 200)
    }
  }

  @Test(
    "the wiki, recent changes and files as of a moment show that moment; history is the way in")
  func panelsThen() async throws {
    let (fixture, seq) = try fixtureWithHistory()
    // A file attached after the moment.
    let rev = try #require(try fixture.store.get("w1:Home")["_rev"]?.stringValue)
    try await fixture.withServer { client in
      var headers = HTTPFields()
      headers[.authorization] = "Basic " + Data("alice:pw-alice".utf8).base64EncodedString()
      headers[.contentType] = "text/plain"
      let put = try await client.execute(
        uri: "/wiki/w1:Home/notes.txt?rev=\(rev)", method: .put, headers: headers,
        body: ByteBuffer(string: "notes")
      ) { Int($0.status.code) }
      #expect(put == 201)
      #expect(try await client.page(.get, "/_wiki/w1/Home", as: "alice").text.contains("notes.txt"))
      let homeThen = try await client.page(.get, "/_wiki/w1/Home?as_of=\(seq)", as: "alice")
      #expect(!homeThen.text.contains("notes.txt"))

      let wiki = try await client.page(.get, "/_wiki/w1/?as_of=\(seq)", as: "alice")
      #expect(wiki.status == 200 && headings(wiki.text) == 1)
      #expect(wiki.text.contains(#"<span id="wiki-members">bob </span>"#))  // carol came later
      #expect(wiki.text.contains(#"href="/_wiki/w1/A?as_of=\#(seq)""#))
      #expect(!wiki.text.contains(#"/_wiki/w1/C"#))
      #expect(wiki.text.contains(#"<ol id="recent-pages">"#))
      #expect(wiki.text.contains(#"href="/_wiki/_recent?as_of=\#(seq)""#))
      #expect(!wiki.text.contains(#"id="new-page""#) && !wiki.text.contains(#"id="settings""#))
      #expect(Set(formIDs(wiki.text)) == ["search", "signout"])
      let now = try await client.page(.get, "/_wiki/w1/", as: "alice")
      #expect(now.text.contains("carol") && now.text.contains(#"id="new-page""#))

      let recent = try await client.page(.get, "/_wiki/_recent?as_of=\(seq)", as: "alice")
      #expect(recent.status == 200 && recent.text.contains(#"id="asof-bar""#))
      #expect(recent.text.contains(#"href="/_wiki/w1/B?as_of=\#(seq)""#))
      #expect(!recent.text.contains("/_wiki/w1/C") && !recent.text.contains("data-feed"))
      #expect(!recent.text.contains(#"class="deleted""#))  // A was alive then
      let carols = try await client.page(.get, "/_wiki/_recent?as_of=\(seq)", as: "carol")
      #expect(carols.text.contains("/_wiki/w1/"))  // a member now
      let bobs = try await client.page(.get, "/_wiki/_recent?as_of=\(seq)", as: "bob")
      #expect(!bobs.text.contains("/_wiki/w2/"))  // carol's wiki, which bob is not in

      // One row per edit, as the live list has: Home twice and A's deletion as of now (its
      // two edits), Home once then; the diff links keep the moment.
      let last = try fixture.store.info.updateSeq.rawValue
      let all = try await client.page(.get, "/_wiki/_recent?as_of=\(last)", as: "alice")
      func rows(_ text: String, _ href: String) -> Int {
        text.components(separatedBy: #"<li class="edit"><a href="\#(href)""#).count - 1
      }
      #expect(rows(all.text, "/_wiki/w1/Home?as_of=\(last)") == 3)  // the file's upload too
      #expect(all.text.contains(#"<li class="edit deleted"><a href="/_wiki/w1/A?as_of=\#(last)""#))
      #expect(all.text.contains(#"href="/_wiki/w1/Home?action=history&amp;as_of=\#(last)""#))
      #expect(rows(recent.text, "/_wiki/w1/Home?as_of=\(seq)") == 1)
      #expect(rows(recent.text, "/_wiki/w1/A?as_of=\(seq)") == 1)
      let scoped = try await client.page(
        .get, "/_wiki/_recent?wiki=w2&as_of=\(last)", as: "carol")
      #expect(scoped.status == 200 && !scoped.text.contains("/_wiki/w1/"))

      // The history's way into the wiki as of each revision.
      let history = try await client.page(.get, "/_wiki/w1/Home?action=history", as: "alice")
      let first = try #require(
        try fixture.store.revisionEvents(of: "w1:Home").first?.seq.rawValue)
      #expect(
        history.text.contains(
          #"<a class="wiki-asof" href="/_wiki/w1/?as_of=\#(first)">view the wiki as of this revision</a>"#
        ))
    }
  }

  @Test("the moment's time is shown only for an event of a document the reader may read")
  func momentTimeFollowsAccess() async throws {
    let fixture = try UIFixture()
    // Seq 3 wrote w1:Other, seq 4 carol's wiki w2, which bob is not in.
    try await fixture.withServer { client in
      let own = try await client.page(.get, "/_wiki/w1/?as_of=3", as: "bob")
      #expect(
        own.text.contains(#"<time class="exact""#) && own.text.contains("UTC</time>, event 3"))
      let other = try await client.page(.get, "/_wiki/w1/?as_of=4", as: "bob")
      #expect(other.status == 200)
      #expect(other.text.contains("Read-only: as of event 4."))
      #expect(!other.text.contains(#"<time class="exact""#))
      let carols = try await client.page(.get, "/_wiki/w2/?as_of=4", as: "carol")
      #expect(carols.text.contains("UTC</time>, event 4"))
    }
  }

  @Test(
    "a moment outside the log, a value that is no moment and a title too long are errors in the app's frame, not raw answers"
  )
  func errorsInTheFrame() async throws {
    let fixture = try UIFixture()
    try await fixture.withServer { client in
      for uri in [
        "/_wiki/w1/Home?as_of=100000", "/_wiki/w1/?as_of=100000", "/_wiki/_recent?as_of=100000",
        "/_wiki/w1/Home?action=history&as_of=100000",
      ] {
        let page = try await client.page(.get, uri, as: "alice")
        #expect(page.status == 400, "\(uri)")
        #expect(
          page.text.contains("No such moment") && page.text.contains("event 100000"), "\(uri)")
        #expect(page.text.contains(#"<span id="user">alice</span>"#), "\(uri)")
        #expect(!page.text.contains("bad_request"), "\(uri)")
        #expect(headings(page.text) == 1, "\(uri)")
      }
      for uri in ["/_wiki/w1/Home?as_of=abc", "/_wiki/w1/?as_of=abc", "/_wiki/_recent?as_of=abc"] {
        let page = try await client.page(.get, uri, as: "alice")
        #expect(page.status == 400, "\(uri)")
        #expect(page.text.contains("Not a moment") && page.text.contains("as_of=28"), "\(uri)")
        #expect(page.text.contains(#"<span id="user">alice</span>"#), "\(uri)")
      }
      // A time before the first event is the empty wiki; after the last one, the present.
      let before = try await client.page(
        .get, "/_wiki/w1/Home?as_of=2000-01-01T00:00:00Z", as: "alice")
      #expect(before.status == 404 && before.text.contains("before the first event"))
      let after = try await client.page(
        .get, "/_wiki/w1/Home?as_of=2999-01-01T00:00:00Z", as: "alice")
      #expect(after.status == 200 && after.text.contains("See"))
      // A title longer than any page's, viewed or edited.
      let long = String(repeating: "x", count: 600)
      for uri in [
        "/_wiki/w1/\(long)", "/_wiki/w1/\(long)?as_of=1", "/_wiki/w1/\(long)?action=edit",
      ] {
        let page = try await client.page(.get, uri, as: "bob")
        #expect(page.status == 400, "\(uri.suffix(12))")
        #expect(page.text.contains("Title too long"), "\(uri.suffix(12))")
        #expect(page.text.contains(#"<span id="user">bob</span>"#), "\(uri.suffix(12))")
      }
      // A non-member still gets the same 404 as for a missing wiki, moment or not.
      let hidden = try await client.page(.get, "/_wiki/w1/Home?as_of=abc", as: "carol")
      #expect(hidden.status == 404)
    }
  }
}
