import CouchAPI
import CouchTestSupport
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import JSON
import TestSupport
import Testing

/// The cases of ../shared/revids/vectors.json replayed over HTTP, exactly as CouchDB 3.4.3 was
/// sent them: each step's raw body with `PUT /db/<id>`, or `DELETE /db/<id>?rev=`.
@Suite struct RevisionIDRouteTests {
  static let vectorsURL = sharedFile("revids/vectors.json")

  @Test("every step answers CouchDB's revision id, inline attachments included")
  func replayOverHTTP() async throws {
    let file = try JSONValue(parsing: [UInt8](Data(contentsOf: Self.vectorsURL)))
    let cases = try #require(file["cases"]?.arrayValue)
    try await withServer { client, _ in
      try await client.call(.put, "/db")
      var agreed = 0
      var withAttachments = 0
      for c in cases {
        let id = try #require(c["id"]?.stringValue)
        var previous: String? = nil
        for step in try #require(c["steps"]?.arrayValue) {
          let expected = try #require(step["rev"]?.stringValue)
          let answer: JSONResponse
          if let raw = step["put"]?.stringValue {
            answer = try await client.call(.put, "/db/\(id)", raw)
            if raw.contains("\"_attachments\"") { withAttachments += 1 }
          } else {
            answer = try await client.call(.delete, "/db/\(id)?rev=\(try #require(previous))")
          }
          #expect(answer["rev"]?.stringValue == expected, "\(id): \(answer.text)")
          if answer["rev"]?.stringValue == expected { agreed += 1 }
          previous = expected
        }
      }
      #expect(agreed == 255)
      #expect(withAttachments == 6)
    }
  }
}
