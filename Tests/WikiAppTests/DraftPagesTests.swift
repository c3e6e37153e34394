import Foundation
import HTTPTypes
import HummingbirdTesting
import JSON
import Log
import Projections
import RevTree
import Testing
import Wiki

@Suite struct DraftPagesTests {
  @Test(
    "a page that is only the user's draft says so and opens the draft; other users see a page that does not exist"
  )
  func unpublishedDraft() async throws {
    let fixture = try UIFixture()
    try await fixture.withServer { client in
      let edit = try await client.page(.get, "/_wiki/w1/Fresh%20Idea?action=edit", as: "bob")
      let token = try #require(edit.csrf)
      let saved = try await client.page(
        .post, "/_wiki/w1/Fresh%20Idea?action=autosave", as: "bob",
        form: ["markdown": "half a thought", "base": "", "csrf": token])
      #expect(saved.status == 200)
      let page = try await client.page(.get, "/_wiki/w1/Fresh%20Idea", as: "bob")
      #expect(page.status == 404)
      #expect(headings(page.text) == 1)
      #expect(page.text.contains(#"id="draft-notice""#) && page.text.contains("not published yet"))
      #expect(page.text.contains(#"<a id="open-draft" href="/_wiki/w1/Fresh%20Idea?action=edit">"#))
      #expect(!page.text.contains("does not exist yet"))
      let opened = try await client.page(.get, "/_wiki/w1/Fresh%20Idea?action=edit", as: "bob")
      #expect(opened.text.contains("half a thought") && opened.text.contains("Your draft"))
      // alice has no draft of it: nothing of bob's shows.
      let alices = try await client.page(.get, "/_wiki/w1/Fresh%20Idea", as: "alice")
      #expect(alices.text.contains("does not exist yet") && !alices.text.contains("draft-notice"))
    }
  }

  @Test(
    "My drafts lists the user's drafts with their wiki, new or not, linked from the header and My wikis; never another user's, nor a wiki they left"
  )
  func myDrafts() async throws {
    let fixture = try UIFixture()
    _ = try Drafts(fixture.store).save(
      user: "bob", page: "w1:Brand New", baseRev: nil, markdown: "new", autosave: true)
    let home = try #require(try fixture.store.get("w1:Home")["_rev"]?.stringValue)
    _ = try Drafts(fixture.store).save(
      user: "bob", page: "w1:Home", baseRev: home, markdown: "# Home\nbob's edit")
    _ = try Drafts(fixture.store).save(
      user: "carol", page: "w2:Carol Notes", baseRev: nil, markdown: "carol's")
    try await fixture.withServer { client in
      let wikis = try await client.page(.get, "/_wiki/", as: "bob")
      #expect(wikis.text.contains(#"<a id="nav-drafts" href="/_wiki/_drafts">My drafts</a>"#))
      #expect(wikis.text.contains(#"<a id="my-drafts" href="/_wiki/_drafts">"#))
      let list = try await client.page(.get, "/_wiki/_drafts", as: "bob")
      #expect(list.status == 200 && headings(list.text) == 1)
      #expect(
        list.text.contains(
          #"<a class="draft" href="/_wiki/w1/Brand%20New?action=edit">Brand New</a>"#))
      #expect(list.text.contains(#"<a class="draft" href="/_wiki/w1/Home?action=edit">Home</a>"#))
      #expect(
        list.text.contains("a new page") && list.text.contains("changes to the published page"))
      #expect(list.text.contains("Secret w1"))
      #expect(!list.text.contains("Carol Notes"))
      // Discard from the list comes back to it; the draft is gone.
      let discarded = try await client.page(
        .post, "/_wiki/w1/Home?action=discard", as: "bob",
        form: ["back": "drafts", "csrf": try #require(list.csrf)])
      #expect(discarded.status == 303 && discarded.headers[.location] == "/_wiki/_drafts")
      #expect(try Drafts(fixture.store).draft(of: "bob", page: "w1:Home") == nil)
      let fewer = try await client.page(.get, "/_wiki/_drafts", as: "bob")
      #expect(!fewer.text.contains(#"href="/_wiki/w1/Home?action=edit""#))
      #expect(fewer.text.contains("Brand New"))
      let alices = try await client.page(.get, "/_wiki/_drafts", as: "alice")
      #expect(alices.text.contains("No drafts") && !alices.text.contains("Brand New"))
      // Once bob is no longer in w1, his drafts of it are not listed.
      let settings = try await client.page(.get, "/_wiki/w1/?action=settings", as: "alice")
      let saved = try await client.page(
        .post, "/_wiki/w1/?action=settings", as: "alice",
        form: ["title": "Secret w1", "members": "", "csrf": try #require(settings.csrf)])
      #expect(saved.status == 303)
      let after = try await client.page(.get, "/_wiki/_drafts", as: "bob")
      #expect(!after.text.contains("Brand New") && !after.text.contains("Secret w1"))
      let signedOut = try await client.page(.get, "/_wiki/_drafts", as: nil)
      #expect(signedOut.status == 303)
    }
  }
}
