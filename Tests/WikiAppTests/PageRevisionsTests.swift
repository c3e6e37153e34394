import Foundation
import HTTPTypes
import HummingbirdTesting
import JSON
import Log
import Projections
import RevTree
import Testing
import Wiki

@Suite struct PageRevisionsTests {
  @Test(
    "the editor's Summary is kept with the draft, published with the revision, and shown in history, recent changes and blame"
  )
  func editSummary() async throws {
    let fixture = try UIFixture()
    let base = try #require(try fixture.store.get("w1:Other")["_rev"]?.stringValue)
    try await fixture.withServer { client in
      let editor = try await client.page(.get, "/_wiki/w1/Other?action=edit", as: "bob")
      #expect(editor.text.contains(#"<label for="summary">Summary</label>"#))
      #expect(editor.text.contains(#"<input id="summary" name="summary" value="""#))
      let token = try #require(editor.csrf)
      let saved = try await client.page(
        .post, "/_wiki/w1/Other?action=autosave", as: "bob",
        form: ["markdown": "Other text\nmore\n", "base": base, "summary": "a draft", "csrf": token])
      #expect(saved.status == 200)
      let reopened = try await client.page(.get, "/_wiki/w1/Other?action=edit", as: "bob")
      #expect(reopened.text.contains(#"name="summary" value="a draft""#))
      let published = try await client.page(
        .post, "/_wiki/w1/Other?action=publish", as: "bob",
        form: [
          "markdown": "Other text\nmore\n", "base": base, "summary": "added a line", "csrf": token,
        ])
      #expect(published.status == 303)
      #expect(try fixture.store.get("w1:Other")["edit_summary"]?.stringValue == "added a line")

      let history = try await client.page(.get, "/_wiki/w1/Other?action=history", as: "alice")
      #expect(history.status == 200 && headings(history.text) == 1)
      #expect(
        history.text.contains(
          #"by <span class="author">bob</span> — <span class="summary">added a line</span>"#))
      // Named by time first; the rev is a small detail.
      #expect(history.text.contains(#"<span class="rev meta" title="revision "#))
      let recent = try await client.page(.get, "/_wiki/_recent", as: "alice")
      #expect(recent.text.contains(#"<span class="summary">added a line</span>"#))
      let blame = try await client.page(.get, "/_wiki/w1/Other?action=blame", as: "alice")
      #expect(blame.text.contains(#"<span class="summary">added a line</span>"#))
    }
  }

  @Test(
    "history offers two revisions to compare; the comparison is inline or side by side, signed and marked with ins and del"
  )
  func compare() async throws {
    let fixture = try UIFixture()
    let first = try #require(try fixture.store.get("w1:Other")["_rev"]?.stringValue)
    var body = try fixture.store.get("w1:Other").objectValue!
    body["markdown"] = .string("Other words\nnew line\n")
    let second = try #require(
      try fixture.store.put(JSONValue.object(body).serialized(), actor: "bob").rev)
    try await fixture.withServer { client in
      let history = try await client.page(.get, "/_wiki/w1/Other?action=history", as: "alice")
      #expect(history.text.contains(#"<form id="compare-form" method="get""#))
      #expect(history.text.contains(#"name="from" value="\#(first)" aria-label="Compare from"#))
      #expect(history.text.contains(#"name="to" value="\#(second)" aria-label="Compare to"#))
      #expect(history.text.contains(#"value="\#(first)" aria-label"#))
      let uri = "/_wiki/w1/Other?action=compare&from=\(first)&to=\(second)"
      let inline = try await client.page(.get, uri, as: "alice")
      #expect(inline.status == 200 && headings(inline.text) == 1)
      #expect(inline.text.contains(#"<table class="diff-table inline" id="diff">"#))
      #expect(inline.text.contains(#"<td class="sign" aria-label="deleted">−</td>"#))
      #expect(inline.text.contains(#"<td class="sign" aria-label="added">+</td>"#))
      // The word that changed in the changed line.
      #expect(inline.text.contains(#"<del class="word">text</del>"#))
      #expect(inline.text.contains(#"<ins class="word">words</ins>"#))
      #expect(inline.text.contains(#"<ins><code>new line</code></ins>"#))
      #expect(inline.text.contains(#"id="view-side""#))
      let side = try await client.page(.get, uri + "&view=side", as: "alice")
      #expect(side.text.contains(#"<table class="diff-table side" id="diff">"#))
      #expect(side.text.contains(#"id="view-inline""#))
      #expect(side.text.contains(#"<td class="text empty"></td>"#))  // the line only the new has
      // Bad input: a clear page in the frame.
      let missing = try await client.page(
        .get, "/_wiki/w1/Other?action=compare&from=1-nope&to=\(second)", as: "alice")
      #expect(missing.status == 404 && missing.text.contains("No such revision"))
      #expect(missing.text.contains(#"id="user""#))
      let none = try await client.page(.get, "/_wiki/w1/Other?action=compare", as: "alice")
      #expect(none.status == 400 && none.text.contains("Which revisions?"))
      // Not for those who may not read the wiki.
      let hidden = try await client.page(.get, uri, as: "carol")
      #expect(hidden.status == 404 && !hidden.text.contains("diff-table"))
      // Text is escaped.
      var evil = try fixture.store.get("w1:Other").objectValue!
      evil["markdown"] = .string("<script>x</script>\n")
      let third = try #require(
        try fixture.store.put(JSONValue.object(evil).serialized(), actor: "bob").rev)
      let escaped = try await client.page(
        .get, "/_wiki/w1/Other?action=compare&from=\(second)&to=\(third)", as: "alice")
      #expect(escaped.text.contains("&lt;script&gt;") && !escaped.text.contains("<script>x"))
    }
  }

  @Test(
    "renaming a page: the new page has its text and history link, the old redirects with a note, links are offered and updated"
  )
  func rename() async throws {
    let fixture = try UIFixture()
    let rev = try #require(try fixture.store.get("w1:Other")["_rev"]?.stringValue)
    _ = try fixture.store.putAttachment(
      "w1:Other", name: "a.txt", data: Array("hi".utf8), contentType: "text/plain", rev: rev,
      actor: "bob")
    let withFile = try #require(try fixture.store.get("w1:Other")["_rev"]?.stringValue)
    try await fixture.withServer { client in
      let form = try await client.page(.get, "/_wiki/w1/Other?action=rename", as: "bob")
      #expect(form.status == 200 && headings(form.text) == 1)
      #expect(form.text.contains(#"<label>New name <input id="rename-name" name="name""#))
      #expect(form.text.contains(#"<option value="w1" selected>Secret w1</option>"#))
      #expect(!form.text.contains("Carol"))  // a wiki bob may not write
      #expect(form.text.contains("1 page links here"))
      let token = try #require(form.csrf)

      // Refused: a name that exists, a wiki not his, a stale revision, no name: nothing written.
      let before = try fixture.store.log.committedPosition
      let taken = try await client.page(
        .post, "/_wiki/w1/Other?action=rename", as: "bob",
        form: ["name": "Home", "wiki": "w1", "rev": withFile, "csrf": token])
      #expect(taken.status == 409 && taken.text.contains("That page exists"))
      #expect(taken.text.contains(#"id="user""#) && headings(taken.text) == 1)
      let foreign = try await client.page(
        .post, "/_wiki/w1/Other?action=rename", as: "bob",
        form: ["name": "X", "wiki": "w2", "rev": withFile, "csrf": token])
      #expect(foreign.status == 404 && foreign.text.contains("No such wiki"))
      let stale = try await client.page(
        .post, "/_wiki/w1/Other?action=rename", as: "bob",
        form: ["name": "X", "wiki": "w1", "rev": rev, "csrf": token])
      #expect(stale.status == 409 && stale.text.contains("The page changed"))
      let empty = try await client.page(
        .post, "/_wiki/w1/Other?action=rename", as: "bob",
        form: ["name": " ", "wiki": "w1", "rev": withFile, "csrf": token])
      #expect(empty.status == 400)
      #expect(try fixture.store.log.committedPosition == before)

      let renamed = try await client.page(
        .post, "/_wiki/w1/Other?action=rename", as: "bob",
        form: ["name": "Renamed", "wiki": "w1", "rev": withFile, "csrf": token])
      #expect(renamed.status == 200 && headings(renamed.text) == 1)
      #expect(
        renamed.text.contains(
          #"<form id="relink" method="post" action="/_wiki/w1/Renamed?action=relink">"#))
      #expect(renamed.text.contains(#"name="pages[]" value="Home" checked"#))
      let new = try fixture.store.get("w1:Renamed")
      #expect(
        new["markdown"]?.stringValue == "Other text"
          && new["renamed_from"]?.stringValue == "w1:Other")
      #expect(try fixture.store.attachment("w1:Renamed", name: "a.txt").attachment.length == 2)
      #expect(try fixture.store.get("w1:Other")["redirect_to"]?.stringValue == "w1:Renamed")
      #expect(try fixture.store.revisionEvents(of: "w1:Renamed").last?.actor == "bob")

      // The old address sends readers on, with a note and a link to the old history.
      let old = try await client.page(.get, "/_wiki/w1/Other", as: "alice")
      #expect(old.status == 303)
      #expect(old.headers[.location] == "/_wiki/w1/Renamed?redirected_from=w1:Other")
      let landed = try await client.page(
        .get, "/_wiki/w1/Renamed?redirected_from=w1:Other", as: "alice")
      #expect(
        landed.text.contains(
          #"Redirected from <a id="redirect-source" href="/_wiki/w1/Other?redirect=no">Other</a>"#))
      #expect(landed.text.contains(#"href="/_wiki/w1/Other?action=history">its history</a>"#))
      // A note is not made up for a page that does not redirect here.
      let spoofed = try await client.page(
        .get, "/_wiki/w1/Renamed?redirected_from=w1:Home", as: "alice")
      #expect(!spoofed.text.contains("Redirected from"))
      let itself = try await client.page(.get, "/_wiki/w1/Other?redirect=no", as: "alice")
      #expect(itself.status == 200 && itself.text.contains("Moved to"))
      let history = try await client.page(.get, "/_wiki/w1/Renamed?action=history", as: "alice")
      #expect(
        history.text.contains(#"renamed from <a href="/_wiki/w1/Other?action=history">Other</a>"#))
      #expect(history.text.contains(#"<span class="summary">renamed from Other</span>"#))
      let oldHistory = try await client.page(.get, "/_wiki/w1/Other?action=history", as: "alice")
      #expect(
        oldHistory.text.contains(
          #"renamed to <a href="/_wiki/w1/Renamed?action=history">Renamed</a>"#))

      // The links: Home's [[Other]] now names Renamed, an edit by bob.
      let relinked = try await client.page(
        .post, "/_wiki/w1/Renamed?action=relink", as: "bob",
        form: ["from": "Other", "pages[]": "Home", "csrf": token])
      #expect(relinked.status == 303 && relinked.headers[.location] == "/_wiki/w1/Renamed")
      #expect(
        try fixture.store.get("w1:Home")["markdown"]?.stringValue
          == "# Home\nSee [[Renamed]] and [[Missing]].")
      let home = try #require(try fixture.store.history(of: "w1:Home").last)
      #expect(home.actor == "bob" && home.summary == "link to renamed page")
      let bogus = try await client.page(
        .post, "/_wiki/w1/Home?action=relink", as: "bob",
        form: ["from": "Other", "pages[]": "Home", "csrf": token])
      #expect(bogus.status == 400)
    }
  }

  @Test("a page moves to another wiki its user may write; one they may not is refused")
  func renameAcrossWikis() async throws {
    let fixture = try UIFixture()
    try fixture.store.put(
      #"{"type":"wiki","title":"Alice two","owner_id":"alice","members":[]}"#, id: "w3",
      actor: "alice")
    let rev = try #require(try fixture.store.get("w1:Other")["_rev"]?.stringValue)
    try await fixture.withServer { client in
      let form = try await client.page(.get, "/_wiki/w1/Other?action=rename", as: "alice")
      #expect(form.text.contains(#"<option value="w3">Alice two</option>"#))
      let token = try #require(form.csrf)
      let moved = try await client.page(
        .post, "/_wiki/w1/Other?action=rename", as: "alice",
        form: ["name": "Moved", "wiki": "w3", "rev": rev, "csrf": token])
      #expect(moved.status == 303 && moved.headers[.location] == "/_wiki/w3/Moved")
      #expect(try fixture.store.get("w3:Moved")["wiki_id"]?.stringValue == "w3")
      // bob may read w1 but not w3: the redirect page is shown, not a way into w3.
      let bobSees = try await client.page(.get, "/_wiki/w1/Other", as: "bob")
      #expect(bobSees.status == 200 && bobSees.text.contains("Moved to"))
      let aliceGoes = try await client.page(.get, "/_wiki/w1/Other", as: "alice")
      #expect(aliceGoes.headers[.location] == "/_wiki/w3/Moved?redirected_from=w1:Other")
    }
  }

  @Test(
    "a page's file is removed after asking, as a revision the history describes; a replaced one too"
  )
  func removeAndReplaceFile() async throws {
    let fixture = try UIFixture()
    let rev = try #require(try fixture.store.get("w1:Other")["_rev"]?.stringValue)
    let withFile = try #require(
      try fixture.store.putAttachment(
        "w1:Other", name: "picture.png", data: [1, 2, 3], contentType: "image/png", rev: rev,
        actor: "bob"
      ).rev)
    try await fixture.withServer { client in
      let page = try await client.page(.get, "/_wiki/w1/Other", as: "alice")
      #expect(
        page.text.contains(
          #"href="/_wiki/w1/Other?action=remove-file&amp;name=picture.png" aria-label="Remove picture.png">Remove</a>"#
        ))
      #expect(page.text.contains(#"class="replace-input" data-name="picture.png""#))
      let ask = try await client.page(
        .get, "/_wiki/w1/Other?action=remove-file&name=picture.png", as: "alice")
      #expect(ask.status == 200 && headings(ask.text) == 1)
      #expect(ask.text.contains(#"<form id="file-remove""#))
      let token = try #require(ask.csrf)
      let before = try fixture.store.log.committedPosition
      let noSuch = try await client.page(
        .post, "/_wiki/w1/Other?action=remove-file", as: "alice",
        form: ["name": "nope.png", "rev": withFile, "csrf": token])
      #expect(noSuch.status == 404 && noSuch.text.contains("No such file"))
      let stale = try await client.page(
        .post, "/_wiki/w1/Other?action=remove-file", as: "alice",
        form: ["name": "picture.png", "rev": rev, "csrf": token])
      #expect(stale.status == 409)
      let carol = try #require(try await client.page(.get, "/_wiki/", as: "carol").csrf)
      let outsider = try await client.page(
        .post, "/_wiki/w1/Other?action=remove-file", as: "carol",
        form: ["name": "picture.png", "rev": withFile, "csrf": carol])
      #expect(outsider.status == 404)
      #expect(try fixture.store.log.committedPosition == before)
      let removed = try await client.page(
        .post, "/_wiki/w1/Other?action=remove-file", as: "alice",
        form: ["name": "picture.png", "rev": withFile, "csrf": token])
      #expect(removed.status == 303)
      #expect(try fixture.store.get("w1:Other")["_attachments"] == nil)
      let last = try #require(try fixture.store.history(of: "w1:Other").last)
      #expect(last.actor == "alice" && last.description == "removed picture.png")
      let history = try await client.page(.get, "/_wiki/w1/Other?action=history", as: "alice")
      #expect(history.text.contains(#"<span class="summary">removed picture.png</span>"#))
      #expect(history.text.contains(#"<span class="summary">added picture.png</span>"#))
    }
    // Replacing: the same name, new bytes (the script's PUT to the attachment API).
    let now = try #require(try fixture.store.get("w1:Other")["_rev"]?.stringValue)
    let a = try #require(
      try fixture.store.putAttachment(
        "w1:Other", name: "p.png", data: [1], contentType: "image/png", rev: now, actor: "bob"
      ).rev)
    _ = try fixture.store.putAttachment(
      "w1:Other", name: "p.png", data: [2], contentType: "image/png", rev: a, actor: "bob")
    #expect(try fixture.store.history(of: "w1:Other").last?.description == "replaced p.png")
  }
}
