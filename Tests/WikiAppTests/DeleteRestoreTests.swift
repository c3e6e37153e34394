import Foundation
import HTTPTypes
import HummingbirdTesting
import JSON
import Log
import Projections
import RevTree
import Testing
import Wiki

/// The number of `<h1` in a page, its Markdown's included (a Markdown that opens with its
/// only `# Title` has it as the page's h1; any other's headings are one level down): one a page.
func headings(_ text: String) -> Int {
  text.components(separatedBy: "<h1").count - 1
}

/// The ids of the forms of a page.
func formIDs(_ text: String) -> [String] {
  text.matches(of: #/<form id="([^"]+)"/#).map { String($0.1) }
}

@Suite struct DeleteRestoreTests {
  @Test(
    "deleting a page asks first, writes a tombstone as the user, and the page's address then says who deleted it and when"
  )
  func deleteAndRestore() async throws {
    let fixture = try UIFixture()
    let rev = try #require(try fixture.store.get("w1:Other")["_rev"]?.stringValue)
    try await fixture.withServer { client in
      let page = try await client.page(.get, "/_wiki/w1/Other", as: "bob")
      #expect(page.text.contains(#"<a id="delete" href="/_wiki/w1/Other?action=delete">"#))
      let ask = try await client.page(.get, "/_wiki/w1/Other?action=delete", as: "bob")
      #expect(ask.status == 200)
      #expect(headings(ask.text) == 1)
      #expect(ask.text.contains(#"<form id="page-delete""#))
      #expect(ask.text.contains(#"name="rev" value="\#(rev)""#))
      #expect(ask.text.contains("the page that links to it"))  // Home links to Other
      #expect(ask.text.contains("Keep it"))
      let token = try #require(ask.csrf)

      // Refusals write nothing: no token, a stale revision, a user who is not in the wiki.
      let forged = try await client.page(
        .post, "/_wiki/w1/Other?action=delete", as: "bob", form: ["rev": rev])
      #expect(forged.status == 403)
      let stale = try await client.page(
        .post, "/_wiki/w1/Other?action=delete", as: "bob", form: ["rev": "1-abc", "csrf": token])
      #expect(stale.status == 409)
      #expect(stale.text.contains("The page changed") && stale.text.contains(#"id="user""#))
      let carolToken = try #require(try await client.page(.get, "/_wiki/", as: "carol").csrf)
      let outsider = try await client.page(
        .post, "/_wiki/w1/Other?action=delete", as: "carol", form: ["rev": rev, "csrf": carolToken])
      #expect(outsider.status == 404)
      #expect(try fixture.store.get("w1:Other")["_rev"]?.stringValue == rev)

      let deleted = try await client.page(
        .post, "/_wiki/w1/Other?action=delete", as: "bob", form: ["rev": rev, "csrf": token])
      #expect(deleted.status == 303 && deleted.headers[.location] == "/_wiki/w1/Other")
      // A CouchDB deletion, by bob, in the log.
      let record = try #require(try fixture.store.record("w1:Other"))
      let winner = try #require(record.tree.winner)
      #expect(winner.isDeleted)
      let tombstone = try #require(try fixture.store.revisionEvents(of: "w1:Other").last)
      #expect(tombstone.deleted && tombstone.actor == "bob" && tombstone.parentRev == rev)
      #expect(throws: StoreError.self) { try fixture.store.get("w1:Other") }

      let gone = try await client.page(.get, "/_wiki/w1/Other", as: "alice")
      #expect(gone.status == 404)
      #expect(headings(gone.text) == 1)
      #expect(
        gone.text.contains(
          "This page was deleted by <span class=\"author\">bob</span> on <time class=\"exact\""))
      #expect(!gone.text.contains("does not exist yet"))
      #expect(gone.text.contains(#"href="/_wiki/w1/Other?action=history""#))
      #expect(gone.text.contains(#"<form id="undelete""#))
      #expect(gone.text.contains(#"name="rev" value="\#(rev)""#))
      // Its last text, readable and restorable from there too.
      let lastText = try await client.page(.get, "/_wiki/w1/Other?rev=\(rev)", as: "alice")
      #expect(lastText.status == 200 && lastText.text.contains("Other text"))
      #expect(lastText.text.contains(#"<form id="restore""#))
      let blame = try await client.page(.get, "/_wiki/w1/Other?action=blame", as: "alice")
      #expect(blame.status == 404 && blame.text.contains("was deleted"))
      #expect(!blame.text.contains("does not exist yet"))
      // carol sees no more of it than before.
      let hidden = try await client.page(.get, "/_wiki/w1/Other", as: "carol")
      #expect(hidden.status == 404 && !hidden.text.contains("deleted by"))

      // History lists the deletion; recent changes shows it deleted; the wiki no longer lists it.
      let history = try await client.page(.get, "/_wiki/w1/Other?action=history", as: "alice")
      #expect(history.status == 200)
      #expect(history.text.components(separatedBy: "class=\"revision").count == 3)
      #expect(history.text.contains("deleted the page</strong>, by <span class=\"author\">bob"))
      #expect(!history.text.contains("?rev=\(winner.rev.description)"))  // nothing to view
      let recent = try await client.page(.get, "/_wiki/_recent", as: "alice")
      #expect(
        recent.text.contains(
          #"<li class="edit deleted"><a href="/_wiki/w1/Other">Other</a> <strong class="deleted-mark">deleted</strong>"#
        ))
      let wiki = try await client.page(.get, "/_wiki/w1/", as: "alice")
      #expect(!wiki.text.contains(#"href="/_wiki/w1/Other""#))
      let home = try await client.page(.get, "/_wiki/w1/Home", as: "alice")
      #expect(home.text.contains(#"href="/_wiki/w1/Other?action=edit""#))  // a missing page now

      // A view of the past takes no posts.
      let pastPost = try await client.page(
        .post, "/_wiki/w1/Other?action=restore&as_of=1", as: "alice",
        form: ["rev": rev, "csrf": try #require(gone.csrf)])
      #expect(pastPost.status == 400 && pastPost.text.contains("Read-only"))
      #expect(try fixture.store.record("w1:Other")?.tree.winner?.isDeleted == true)
      let editor = try await client.page(.get, "/_wiki/w1/Other?action=edit", as: "alice")
      #expect(editor.text.contains("The page was deleted: publishing brings it back"))

      // Restore: the last live revision's text, as a new revision on the tombstone.
      let aliceToken = try #require(gone.csrf)
      let notTheTombstone = try await client.page(
        .post, "/_wiki/w1/Other?action=restore", as: "alice",
        form: ["rev": winner.rev.description, "csrf": aliceToken])
      #expect(notTheTombstone.status == 400)
      #expect(try fixture.store.record("w1:Other")?.tree.winner?.isDeleted == true)
      let restored = try await client.page(
        .post, "/_wiki/w1/Other?action=restore", as: "alice",
        form: ["rev": rev, "csrf": aliceToken])
      #expect(restored.status == 303)
      let back = try fixture.store.get("w1:Other")
      #expect(back["markdown"]?.stringValue == "Other text")
      #expect(back["type"]?.stringValue == "page" && back["updated_by"]?.stringValue == "alice")
      let last = try #require(try fixture.store.revisionEvents(of: "w1:Other").last)
      #expect(last.actor == "alice" && last.parentRev == winner.rev.description)
      let view = try await client.page(.get, "/_wiki/w1/Other", as: "bob")
      #expect(view.status == 200 && view.text.contains("Other text"))
      #expect(view.text.contains(">Home</a>"))  // its backlinks are back
      let after = try await client.page(.get, "/_wiki/w1/Other?action=history", as: "bob")
      #expect(after.text.components(separatedBy: "class=\"revision").count == 4)
      let wikiAgain = try await client.page(.get, "/_wiki/w1/", as: "alice")
      #expect(wikiAgain.text.contains(#"href="/_wiki/w1/Other""#))
    }
  }

  @Test("publishing a draft of a deleted page brings it back with the draft's text")
  func publishOverDeletion() async throws {
    let fixture = try UIFixture()
    let rev = try #require(try fixture.store.get("w1:Other")["_rev"]?.stringValue)
    _ = try fixture.store.delete("w1:Other", rev: rev, actor: "alice")
    try await fixture.withServer { client in
      let edit = try await client.page(.get, "/_wiki/w1/Other?action=edit", as: "bob")
      let base = try #require(
        edit.text.firstMatch(of: #/name="base" value="([^"]*)"/#).map { String($0.1) })
      #expect(base.isEmpty)
      let published = try await client.page(
        .post, "/_wiki/w1/Other?action=publish", as: "bob",
        form: ["markdown": "back again", "base": base, "csrf": try #require(edit.csrf)])
      #expect(published.status == 303)
      #expect(try fixture.store.get("w1:Other")["markdown"]?.stringValue == "back again")
      let history = try await client.page(.get, "/_wiki/w1/Other?action=history", as: "bob")
      #expect(history.text.components(separatedBy: "class=\"revision").count == 4)
    }
  }

  @Test("a page with conflicting revisions is not deleted: the conflict is resolved first")
  func conflictedIsNotDeleted() async throws {
    let fixture = try UIFixture()
    let rev = try #require(try fixture.store.get("w1:Home")["_rev"]?.stringValue)
    let hash = rev.split(separator: "-")[1]
    for leaf in ["aaaa", "bbbb"] {
      _ = try fixture.store.bulkDocs(
        [
          try JSONValue(
            parsing:
              #"{"_id":"w1:Home","_rev":"2-\#(leaf)","_revisions":{"start":2,"ids":["\#(leaf)","\#(hash)"]},"type":"page","wiki_id":"w1","markdown":"\#(leaf)"}"#
          )
        ], newEdits: false, actor: "alice")
    }
    try await fixture.withServer { client in
      let ask = try await client.page(.get, "/_wiki/w1/Home?action=delete", as: "alice")
      #expect(ask.status == 409)
      #expect(ask.text.contains("Resolve the conflict first") && ask.text.contains(#"id="user""#))
      let token = try #require(ask.csrf)
      let winner = try #require(try fixture.store.get("w1:Home")["_rev"]?.stringValue)
      let refused = try await client.page(
        .post, "/_wiki/w1/Home?action=delete", as: "alice", form: ["rev": winner, "csrf": token])
      #expect(refused.status == 409)
      #expect(try fixture.store.get("w1:Home")["_rev"]?.stringValue == winner)
    }
  }
}

@Suite struct RestoreKeepsFilesTests {
  @Test("restoring an old revision of a live page brings its text back and keeps the page's files")
  func restoreKeepsFiles() async throws {
    let fixture = try UIFixture()
    let first = try fixture.store.put(
      #"{"type":"page","wiki_id":"w1","markdown":"first text","_attachments":{"a.txt":{"content_type":"text/plain","data":"aGk="}}}"#,
      id: "w1:Files", actor: "alice")
    let firstRev = try #require(first.rev)
    _ = try fixture.store.put(
      #"{"_rev":"\#(firstRev)","type":"page","wiki_id":"w1","markdown":"second text","_attachments":{"a.txt":{"stub":true}}}"#,
      id: "w1:Files", actor: "alice")
    try await fixture.withServer { client in
      let token = try #require(try await client.page(.get, "/_wiki/w1/Files", as: "alice").csrf)
      let restored = try await client.page(
        .post, "/_wiki/w1/Files?action=restore", as: "alice",
        form: ["rev": firstRev, "csrf": token])
      #expect(restored.status == 303)
      let back = try fixture.store.get("w1:Files")
      #expect(back["markdown"]?.stringValue == "first text")
      #expect(back["_attachments"]?["a.txt"] != nil)
      #expect(try fixture.store.attachment("w1:Files", name: "a.txt").attachment.name == "a.txt")
    }
  }
}
