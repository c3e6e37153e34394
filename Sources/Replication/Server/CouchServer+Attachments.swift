import Foundation
import HTTPTypes
import Hummingbird
import JSON
import NIOCore
import Projections
import RevTree

extension CouchServer {
  // MARK: Attachments

  /// `GET/HEAD/PUT/DELETE /{db}/{docid}/{attachment}`, as `chttpd_db:db_attachment_req`.
  ///
  /// `GET` sends the bytes with the stored `Content-Type`, `ETag` `"<base64 MD5>"` (a matching
  /// `If-None-Match` is `304`), `Content-Security-Policy: sandbox`; a gzip-stored attachment
  /// goes out gzip (`Content-Encoding: gzip`) when `Accept-Encoding` takes gzip, else decoded;
  /// an identity-stored one honours a single `Range` (`206`). `PUT` writes the body as the
  /// attachment (`Content-Type` its type; `Content-MD5` checked when given; without `rev` a new
  /// document; `Content-Encoding: gzip` stored as sent); `DELETE` removes it. Both answer `{"ok","id","rev"}`.
  func attachment(
    _ store: DocumentStore, db: String, id: String, name: String, request: Request,
    query: QueryParameters
  ) async throws -> Response {
    switch request.method {
    case .get, .head:
      return try getAttachment(
        store, id: id, name: name, request: request, query: query, head: request.method == .head)
    case .put:
      let type = request.headers[.contentType] ?? AttachmentInput.defaultContentType
      let encoding = (request.headers[.contentEncoding] ?? "identity")
        .trimmingCharacters(in: .whitespaces).lowercased()
      switch encoding {
      case "identity", "gzip": break
      default:
        throw ReplicationError(
          "bad_content_type", "Only gzip and identity content-encodings are supported",
          status: 415)
      }
      let data = try await self.body(of: request)
      if let md5 = request.headers[Self.contentMD5] {
        guard let given = Base64.decode(md5), given == AttachmentEncoding.md5(data) else {
          throw ReplicationError(
            "content_md5_mismatch", "Possible message corruption.", status: 400)
        }
      }
      let rev = try requestedRev(request, query)
      let actor = options.actor
      let result = try await store.putAttachmentAsync(
        id, name: name, data: data, contentType: type, rev: rev, gzipped: encoding == "gzip",
        actor: actor)
      var headers = HTTPFields()
      headers[.location] = location(db, id) + "/" + PercentDecoding.encode(name)
      return CouchResponse.json(result.json, status: .created, headers: headers)
    case .delete:
      let rev = try requestedRev(request, query)
      let actor = options.actor
      let result = try await store.deleteAttachmentAsync(id, name: name, rev: rev, actor: actor)
      return CouchResponse.json(result.json, status: .ok)
    default:
      throw ReplicationError.methodNotAllowed(["DELETE", "GET", "HEAD", "PUT"])
    }
  }

  static let contentMD5 = HTTPField.Name("Content-MD5")!
  static let contentSecurityPolicy = HTTPField.Name("Content-Security-Policy")!

  func getAttachment(
    _ store: DocumentStore, id: String, name: String, request: Request, query: QueryParameters,
    head: Bool
  ) throws -> Response {
    let found = try store.attachment(id, name: name, rev: query["rev"])
    let a = found.attachment
    let etag = "\"" + Base64.encode(a.md5) + "\""
    var headers = HTTPFields()
    headers[.eTag] = etag
    headers[.cacheControl] = "must-revalidate"
    headers[.contentType] =
      a.contentTypeString ?? String(decoding: a.contentType.serialized(), as: UTF8.self)
    let gzip = a.encoding == "gzip"
    let sendEncoded = gzip && Self.acceptsGzip(request.headers[.acceptEncoding])
    if sendEncoded { headers[.contentEncoding] = "gzip" }
    headers[.acceptRanges] = gzip ? "none" : "bytes"
    headers[Self.contentSecurityPolicy] = "sandbox"
    if let match = request.headers[.ifNoneMatch],
      match.split(separator: ",").contains(where: {
        $0.trimmingCharacters(in: .whitespaces) == etag
      })
    {
      return Response(status: .notModified, headers: headers, body: ResponseBody())
    }
    var bytes =
      sendEncoded ? try store.attachmentStoredBytes(a) : try store.attachmentData(a)
    var status = HTTPResponse.Status.ok
    if !gzip, let range = request.headers[.range],
      let (from, to) = try Self.singleRange(range, length: bytes.count)
    {
      headers[.contentRange] = "bytes \(from)-\(to)/\(bytes.count)"
      bytes = Array(bytes[from...to])
      status = .partialContent
    }
    headers[.contentLength] = String(bytes.count)
    if head { return Response(status: status, headers: headers, body: ResponseBody()) }
    return Response(
      status: status, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes)))
  }

  /// Whether `Accept-Encoding` takes gzip (`couch_httpd:accepted_encodings/1`: `gzip` or `*`
  /// with a non-zero quality).
  static func acceptsGzip(_ header: String?) -> Bool {
    guard let header else { return false }
    for item in header.split(separator: ",") {
      let parts = item.split(separator: ";").map {
        $0.trimmingCharacters(in: .whitespaces).lowercased()
      }
      guard let coding = parts.first, coding == "gzip" || coding == "*" else { continue }
      let q = parts.dropFirst().first { $0.hasPrefix("q=") }.flatMap { Double($0.dropFirst(2)) }
      if (q ?? 1) > 0 { return true }
    }
    return false
  }

  /// The one byte range of a `Range: bytes=...` header, clamped to `length`
  /// (`chttpd_db:parse_ranges`); nil to send the whole attachment (no usable range, `0-`, or
  /// several ranges, which wikilog answers in full rather than as multipart/byteranges).
  /// A range that ends before it starts or starts past the end is `416`.
  static func singleRange(_ header: String, length: Int) throws(ReplicationError) -> (Int, Int)? {
    guard header.hasPrefix("bytes=") else { return nil }
    let specs = header.dropFirst(6).split(separator: ",")
    guard specs.count == 1, let spec = specs.first else { return nil }
    let trimmed = spec.trimmingCharacters(in: .whitespaces)
    guard let dash = trimmed.firstIndex(of: "-") else { return nil }
    let fromText = trimmed[..<dash]
    let toText = trimmed[trimmed.index(after: dash)...]
    let unsatisfiable = ReplicationError(
      "requested_range_not_satisfiable", "Requested range not satisfiable", status: 416)
    var from: Int
    var to: Int
    if fromText.isEmpty {
      guard let n = Int(toText) else { return nil }
      from = max(0, length - n)
      to = length - 1
    } else {
      guard let f = Int(fromText) else { return nil }
      from = f
      if toText.isEmpty {
        if from == 0 { return nil }
        to = length - 1
      } else {
        guard let t = Int(toText) else { return nil }
        guard t >= from else { throw unsatisfiable }
        to = min(t, length - 1)
      }
    }
    guard from < length, from <= to else { throw unsatisfiable }
    return (from, to)
  }
}
