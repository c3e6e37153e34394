import Foundation
import Testing

@testable import Auth

@Suite struct ScopedTokenTests {
  @Test("a feed token signs nothing in; only verify(_:scope:) with its scope accepts it")
  func feedTokenSignsNothingIn() async throws {
    let t = try TestUsers()
    try t.users.add(name: "ann", password: "pw", actor: "admin")
    let auth = Authenticator(users: t.users, sessions: SessionCookies(secret: "s"))
    let key = Array("a key".utf8)
    let (feed, record) = try auth.tokens.create(
      user: "ann", label: "feeds", scope: APITokens.feedScope, key: key, actor: "ann")
    #expect(record.scope == APITokens.feedScope)
    #expect(try auth.tokens.list(user: "ann").map(\.scope) == [APITokens.feedScope])
    // Derived from its id under the key: the holder of the key shows it again.
    #expect(APITokens.derivedToken(id: record.id, key: key) == feed)
    #expect(APITokens.derivedToken(id: record.id, key: Array("another".utf8)) != feed)
    #expect(try auth.tokens.verify(feed, scope: APITokens.feedScope)?.name == "ann")
    // Not an API token: the entry point refuses it as it refuses a wrong token.
    #expect(try auth.tokens.verify(feed) == nil)
    let signedIn = await auth.authenticate(
      authorization: "Token token=\(feed)", cookie: nil, client: "test")
    #expect(throws: AuthError.self) { try signedIn.get() }
    // And an API token is no feed token.
    let (api, _) = try auth.tokens.create(user: "ann", actor: "ann")
    #expect(try auth.tokens.verify(api, scope: APITokens.feedScope) == nil)
    #expect(try auth.tokens.verify(api)?.name == "ann")
    // Revoked: nothing.
    try auth.tokens.revoke(id: record.id, actor: "ann")
    #expect(try auth.tokens.verify(feed, scope: APITokens.feedScope) == nil)
  }
}
