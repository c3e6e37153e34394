import Foundation
import HTTPTypes
import Hummingbird
import JSON
import NIOCore
import Projections

/// Whether an `Accept` header takes a media type, as CouchDB decides it
/// (`mochiweb_request:accepts_content_type/1`): no header counts as `*/*`; the header is
/// lowercased and split at commas; an entry with parameters other than `q` is a type of its
/// own (`multipart/mixed;x=1` takes nothing); `*/*`, the type itself or its `main/*` with a
/// quality above 0 take it; a malformed quality makes the whole header take nothing.
///
/// ```swift
/// AcceptHeader.accepts(nil, "multipart/mixed")                      // true
/// AcceptHeader.accepts("application/json", "multipart/mixed")       // false
/// AcceptHeader.accepts("multipart/*;q=0.5", "multipart/related")    // true
/// ```
enum AcceptHeader {
  static func accepts(_ header: String?, _ type: String) -> Bool {
    guard let entries = parse(header ?? "*/*") else { return false }
    let wanted = type.lowercased()
    let main = wanted.split(separator: "/").first.map(String.init) ?? wanted
    return entries.contains { entry in
      entry.q > 0 && (entry.type == "*/*" || entry.type == wanted || entry.type == main + "/*")
    }
  }

  /// `mochiweb_util:parse_qvalues/1`: (type with its non-`q` parameters, quality) pairs; nil
  /// for a malformed quality.
  static func parse(_ header: String) -> [(type: String, q: Double)]? {
    var out: [(type: String, q: Double)] = []
    for item in header.lowercased().split(separator: ",") {
      var pieces = item.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }
      guard !pieces.isEmpty else { continue }
      let type = pieces.removeFirst()
      var q = 1.0
      var rest: [String] = []
      for piece in pieces where !piece.isEmpty {
        let compact = piece.replacingOccurrences(of: " ", with: "")
        if compact.hasPrefix("q=") {
          guard let value = Double(compact.dropFirst(2)), value >= 0, value <= 1 else {
            return nil
          }
          q = value
        } else {
          rest.append(compact)
        }
      }
      out.append((type: ([type] + rest).joined(separator: ";"), q: q))
    }
    return out
  }
}

/// A `multipart/...` answer assembled from byte runs and attachment blobs, sent with its
/// length and the blobs read a MiB at a time (the server's memory does not grow with the
/// attachments).
struct MultipartAnswer: Sendable {
  enum Segment: Sendable {
    case bytes([UInt8])
    /// `length` bytes of an attachment's blob as stored (gzip ones still gzip), from `offset`.
    case blob(md5: [UInt8], offset: Int, length: Int)
  }

  /// The segments before ``tail``.
  private var closed: [Segment] = []
  /// Bytes since the last blob, appended in place.
  private var tail: [UInt8] = []
  private(set) var length = 0

  /// Everything, in order.
  var segments: [Segment] { tail.isEmpty ? closed : closed + [.bytes(tail)] }

  mutating func append(_ bytes: [UInt8]) {
    length += bytes.count
    tail.append(contentsOf: bytes)
  }

  mutating func append(_ text: String) {
    length += text.utf8.count
    tail.append(contentsOf: text.utf8)
  }

  mutating func append(_ other: MultipartAnswer) {
    for segment in other.segments {
      switch segment {
      case .bytes(let bytes): append(bytes)
      case .blob(let md5, let offset, let count): appendBlob(md5, from: offset, count: count)
      }
    }
  }

  mutating func appendBlob(_ a: StoredAttachment) {
    appendBlob(a.md5, from: 0, count: a.storedLength)
  }

  /// `count` bytes of `a`'s blob from `offset`.
  mutating func appendBlob(_ a: StoredAttachment, from offset: Int, count: Int) {
    appendBlob(a.md5, from: offset, count: count)
  }

  private mutating func appendBlob(_ md5: [UInt8], from offset: Int, count: Int) {
    if !tail.isEmpty {
      closed.append(.bytes(tail))
      tail = []
    }
    closed.append(.blob(md5: md5, offset: offset, length: count))
    length += count
  }

  /// One revision as `couch_doc:doc_to_multi_part_stream` writes it: with no attachment data
  /// to send, its JSON alone (`application/json`); otherwise `multipart/related` with the
  /// JSON first (its `"follows": true` entries) and each following attachment's bytes as
  /// stored, `Content-Encoding` naming a gzip one. `doc` must have been read with
  /// `attachments`, `follows` and `att_encoding_info`.
  static func document(
    _ doc: JSONValue, id: String, boundary: String, store: DocumentStore
  ) throws -> (contentType: String, body: MultipartAnswer) {
    var following: [StoredAttachment] = []
    if let atts = doc["_attachments"]?.objectValue, let rev = doc["_rev"]?.stringValue {
      let names = atts.members.filter { $0.value["follows"] == .bool(true) }.map(\.key)
      if !names.isEmpty { following = try store.attachments(id, names: names, rev: rev) }
    }
    var body = MultipartAnswer()
    let json = doc.serialized()
    guard !following.isEmpty else {
      body.append(json)
      return ("application/json", body)
    }
    body.append("--\(boundary)\r\nContent-Type: application/json\r\n\r\n")
    body.append(json)
    body.append("\r\n--\(boundary)")
    for a in following {
      let type = a.contentTypeString ?? String(decoding: a.contentType.serialized(), as: UTF8.self)
      var headers =
        "\r\nContent-Disposition: attachment; filename=\"\(a.name)\"\r\nContent-Type: \(type)"
        + "\r\nContent-Length: \(a.storedLength)"
      if let encoding = a.encoding { headers += "\r\nContent-Encoding: \(encoding)" }
      body.append(headers + "\r\n\r\n")
      body.appendBlob(a)
      body.append("\r\n--\(boundary)")
    }
    body.append("--")
    return ("multipart/related; boundary=\"\(boundary)\"", body)
  }

  /// The response: `status`, `headers` plus `Content-Type` and `Content-Length`, the body
  /// unless `head`.
  func response(
    contentType: String, status: HTTPResponse.Status = .ok, headers: HTTPFields = [:],
    head: Bool, store: DocumentStore, server: CouchServer
  ) -> Response {
    var headers = headers
    headers[.contentType] = contentType
    headers[.contentLength] = String(length)
    if head { return Response(status: status, headers: headers, body: ResponseBody()) }
    let segments = self.segments
    let chunk = CouchServer.attachmentChunkBytes
    let body = ResponseBody(contentLength: length) { writer in
      for segment in segments {
        switch segment {
        case .bytes(let bytes):
          try await writer.write(ByteBuffer(bytes: bytes))
        case .blob(let md5, let offset, let count):
          let reader = try await server.blocking { try store.blobs.open(md5) }
          if offset > 0 { try await server.blocking { try reader.seek(to: offset) } }
          var left = count
          while left > 0 {
            let want = min(chunk, left)
            let piece = try await server.blocking { try reader.read(upTo: want) }
            guard !piece.isEmpty else {
              throw StoreError.internalError("an attachment blob is shorter than recorded")
            }
            left -= piece.count
            try await writer.write(ByteBuffer(bytes: piece))
          }
        }
      }
      try await writer.finish(nil)
    }
    return Response(status: status, headers: headers, body: body)
  }
}
