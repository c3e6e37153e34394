import Foundation
import JSON
import RevTree
import TestSupport
import Testing

/// Revision ids against the 100 cases of ../shared/revids/vectors.json, computed by CouchDB 3.4.3.
@Suite struct RevisionIDTests {
  static let vectorsURL = sharedFile("revids/vectors.json")

  static func cases() throws -> [JSONValue] {
    let file = try JSONValue(parsing: [UInt8](Data(contentsOf: vectorsURL)))
    return try #require(file["cases"]?.arrayValue)
  }

  /// The attachments of a body as CouchDB digests inline ones whose type it does not compress
  /// (all the vectors' types): MD5 of the decoded `data`.
  static func attachments(_ body: JSONValue) throws -> [RevisionDigest.Attachment] {
    guard let atts = body["_attachments"]?.objectValue else { return [] }
    return try atts.members.map { m in
      let text = try #require(m.value["data"]?.stringValue)
      let data = try #require(Data(base64Encoded: text))
      return RevisionDigest.Attachment(
        name: m.key, contentType: m.value["content_type"] ?? .string("application/octet-stream"),
        md5: MD5.hash([UInt8](data)).bytes)
    }
  }

  @Test("the worked example of ErlangTermFormat: bytes and id as Erlang/OTP computes them")
  func workedExample() throws {
    let body = try JSONValue(parsing: #"{"a":[1,2],"_id":"doc","b":1.5}"#)
    let input = RevisionDigest.input(parent: nil, deleted: false, body: body)
    #expect(input.count == 58)
    #expect(Array(input.prefix(6)) == [131, 108, 0, 0, 0, 5])
    #expect(
      RevisionDigest.revision(parent: nil, deleted: false, body: body).description
        == "1-a32c3c6815c57dd7e868655acc8d0d4c")
  }

  @Test("every step of the 100 CouchDB cases gets CouchDB's revision id")
  func vectors() throws {
    let cases = try Self.cases()
    #expect(cases.count == 100)
    var checked = 0
    for c in cases {
      var parent: RevID? = nil
      for step in try #require(c["steps"]?.arrayValue) {
        let expected = try #require(step["rev"]?.stringValue)
        let rev: RevID
        if let raw = step["put"]?.stringValue {
          let body = try JSONValue(parsing: raw)
          let deleted = body["_deleted"]?.boolValue ?? false
          rev = RevisionDigest.revision(
            parent: parent, deleted: deleted, body: body, attachments: try Self.attachments(body))
        } else {
          rev = RevisionDigest.revision(parent: parent, deleted: true, body: .object(JSONObject()))
        }
        #expect(rev.description == expected, "\(c["id"]?.stringValue ?? "?")")
        parent = rev
        checked += 1
      }
    }
    #expect(checked == 255)
  }
}
