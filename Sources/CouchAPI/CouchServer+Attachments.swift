import Auth
import Formats
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
  /// an identity-stored one honours `Range` (`206`; two to nine ranges as
  /// `multipart/byteranges`, ten or more answered whole, as CouchDB does). `PUT` writes the body as the
  /// attachment (`Content-Type` its type; `Content-MD5` checked when given; without `rev` a new
  /// document; `Content-Encoding: gzip` stored as sent); `DELETE` removes it. Both answer `{"ok","id","rev"}`.
  func attachment(
    _ store: DocumentStore, db: String, id: String, name: String, request: Request,
    query: QueryParameters, caller: Caller, access: DatabaseAccess
  ) async throws -> Response {
    if access.plainWritesOnly && request.method != .get && request.method != .head {
      try requireServerAdmin(caller)
    }
    let handler = try Self.attachmentMethods.handler(for: request.method)
    return try await handler(self)(store, db, id, name, request, query, caller, access)
  }

  /// The methods of `/{db}/{docid}/{attachment}` and their handlers (``MethodTable``).
  static let attachmentMethods = MethodTable<
    @Sendable (CouchServer) ->
      @Sendable (
        DocumentStore, String, String, String, Request, QueryParameters, Caller, DatabaseAccess
      ) async throws -> Response
  >(
    [.get: attachmentGet, .head: attachmentGet, .put: attachmentPut, .delete: attachmentDelete],
    allow: ["DELETE", "GET", "HEAD", "PUT"])

  /// `GET and HEAD` of attachment.
  func attachmentGet(
    _ store: DocumentStore, db: String, id: String, name: String, request: Request,
    query: QueryParameters, caller: Caller, access: DatabaseAccess
  ) async throws -> Response {
    try access.checkRead(id, in: store)
    return try getAttachment(
      store, id: id, name: name, request: request, query: query, head: request.method == .head)
  }

  /// `PUT /{db}/{docid}/{attachment}`.
  func attachmentPut(
    _ store: DocumentStore, db: String, id: String, name: String, request: Request,
    query: QueryParameters, caller: Caller, access: DatabaseAccess
  ) async throws -> Response {
    let type = request.headers[.contentType] ?? AttachmentInput.defaultContentType
    let encoding = (request.headers[.contentEncoding] ?? "identity")
      .trimmingCharacters(in: .whitespaces).lowercased()
    switch encoding {
    case "identity", "gzip": break
    default:
      throw CouchError(
        "bad_content_type", "Only gzip and identity content-encodings are supported",
        status: 415)
    }
    let rev = try requestedRev(request, query)
    // An attachment leaves the document's other fields as they are.
    // The write check first, so that a document the caller may not see is refused as a
    // missing one is (a 404 would tell it apart).
    let current = (try? store.get(id, options: GetOptions(rev: rev)))
    try access.checkWrite(
      docID: id, body: current ?? .object(JSONObject()), replicated: false, in: store)
    if current != nil { try access.checkRead(id, in: store) }
    let gzipped = encoding == "gzip"
    let received = try await receiveAttachment(
      store, name: name, request: request, contentType: type, gzipped: gzipped)
    let actor = caller.actor
    let result = try await store.putStoredAttachmentAsync(
      id, name: name, blob: received.blob, length: received.blob.receivedLength,
      gzipped: received.gzipStored, contentType: type, rev: rev, actor: actor)
    var headers = HTTPFields()
    headers[.location] = location(db, id) + "/" + PercentDecoding.encode(name)
    return CouchResponse.json(result.json, status: .created, headers: headers)
  }

  /// `DELETE /{db}/{docid}/{attachment}`.
  func attachmentDelete(
    _ store: DocumentStore, db: String, id: String, name: String, request: Request,
    query: QueryParameters, caller: Caller, access: DatabaseAccess
  ) async throws -> Response {
    let rev = try requestedRev(request, query)
    try access.checkWrite(
      docID: id, body: (try? store.get(id)) ?? .object(JSONObject()), replicated: false,
      in: store)
    try access.checkRead(id, in: store)
    let actor = caller.actor
    let result = try await store.deleteAttachmentAsync(id, name: name, rev: rev, actor: actor)
    return CouchResponse.json(result.json, status: .ok)
  }

  /// How much of an attachment's body is gathered before it goes to the blob file, and how
  /// much of a blob is read at a time to send it.
  static let attachmentChunkBytes = 1 << 20

  /// Streams the body of `PUT /db/doc/att` into the blob store (``BlobUpload``) a chunk at a
  /// time, the file written on the thread pool: gzipped on the way when the type is
  /// compressible and the body not sent gzip (as CouchDB stores it), checked against
  /// `Content-MD5` when given. A body beyond ``CouchServerOptions/maxAttachmentBytes`` is
  /// `413 attachment_too_large` (before reading when `Content-Length` says so), one that
  /// ends before its `Content-Length` (a client gone) `400`; either way the temporary file
  /// is removed and nothing is stored. The blob is synced and in place when this returns.
  func receiveAttachment(
    _ store: DocumentStore, name: String, request: Request, contentType: String, gzipped: Bool
  ) async throws -> (blob: BlobUpload.Result, gzipStored: Bool) {
    guard !name.hasPrefix("_") else {
      throw CouchError.badRequest(
        "Attachment name '\(name)' starts with prohibited character '_'")
    }
    let limit = settings.current.maxAttachmentBytes
    let tooLarge = CouchError("attachment_too_large", name, status: 413)
    let declared = request.headers[.contentLength].flatMap { Int($0) }
    if let limit, let declared, declared > limit { throw tooLarge }
    var expectedMD5: [UInt8]? = nil
    if let md5 = request.headers[Self.contentMD5] {
      guard let given = Base64.decode(md5) else {
        throw CouchError("content_md5_mismatch", "Possible message corruption.", status: 400)
      }
      expectedMD5 = given
    }
    let compress = !gzipped && AttachmentEncoding.isCompressible(contentType)
    let blobs = store.blobs
    let upload = try await blocking { try blobs.upload(gzip: compress) }
    var writing: Task<[UInt8], any Error>? = nil
    do {
      let chunk = Self.attachmentChunkBytes
      var pending: [UInt8] = []
      pending.reserveCapacity(chunk)
      var spare: [UInt8] = []
      var received = 0
      // One chunk is hashed and written on the thread pool while the next is received: at
      // most two chunks in memory, the same two buffers throughout (the written one comes
      // back to be filled again).
      for try await buffer in request.body {
        received += buffer.readableBytes
        if let limit, received > limit { throw tooLarge }
        pending.append(contentsOf: buffer.readableBytesView)
        if pending.count >= chunk {
          if let written = try await writing?.value { spare = written }
          let piece = pending
          pending = spare
          spare = []
          pending.removeAll(keepingCapacity: true)
          pending.reserveCapacity(chunk)
          writing = Task {
            try await self.blocking {
              try upload.write(piece)
              return piece
            }
          }
        }
      }
      _ = try await writing?.value
      writing = nil
      if let declared, declared != received {
        throw CouchError.badRequest(
          "the attachment body ended after \(received) of its \(declared) bytes")
      }
      let last = pending
      let expected = expectedMD5
      let blob = try await blocking {
        try upload.write(last)
        return try upload.finish(expectingMD5: expected)
      }
      return (blob, gzipped || compress)
    } catch {
      // The chunk being written ends before the file goes.
      _ = try? await writing?.value
      upload.discard()
      throw error
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
    if Self.matches(request.headers[.ifNoneMatch], etag) { return Self.notModified(headers) }
    // The stored bytes go out as they are, or (gzip-stored, sent decoded) inflated.
    let inflate = gzip && !sendEncoded
    let total = sendEncoded ? a.storedLength : a.length
    var from = 0
    var count = total
    var status = HTTPResponse.Status.ok
    if !gzip, let range = request.headers[.range],
      let ranges = try Self.ranges(range, length: total)
    {
      if ranges.count == 1, let (first, last) = ranges.first {
        headers[.contentRange] = "bytes \(first)-\(last)/\(total)"
        from = first
        count = last - first + 1
        status = .partialContent
      } else if ranges.count < 10 {
        // `chttpd_db:send_ranges_multipart`: one part per range, in the order asked.
        let type = headers[.contentType] ?? "application/octet-stream"
        let boundary = Multipart.newBoundary()
        var body = MultipartAnswer()
        body.append("--\(boundary)")
        for (first, last) in ranges {
          body.append(
            "\r\nContent-Type: \(type)\r\nContent-Range: bytes \(first)-\(last)/\(total)\r\n\r\n")
          body.appendBlob(a, from: first, count: last - first + 1)
          body.append("\r\n--\(boundary)")
        }
        body.append("--")
        var partHeaders = headers
        partHeaders[.contentType] = nil
        return body.response(
          contentType: "multipart/byteranges; boundary=\"\(boundary)\"", status: .partialContent,
          headers: partHeaders, head: head, store: store, server: self)
      }
    }
    // Stored as sent gzip, its decoded length unknown (recorded as the gzip length): sent
    // decoded without a length, as CouchDB falls back to a chunked response.
    let lengthKnown = !(inflate && a.length == a.storedLength)
    if lengthKnown { headers[.contentLength] = String(count) }
    if head { return Response(status: status, headers: headers, body: ResponseBody()) }
    let reader = try store.blobs.open(a.md5)
    let chunk = Self.attachmentChunkBytes
    let start = from
    let length = count
    let body = ResponseBody(contentLength: lengthKnown ? length : nil) { writer in
      var left = lengthKnown ? length : Int.max
      if start > 0 { try await self.blocking { try reader.seek(to: start) } }
      let decoder = inflate ? GunzipStream() : nil
      while left > 0 {
        let want = min(chunk, left)
        var piece = try await self.blocking { () throws -> [UInt8] in
          guard let decoder else { return try reader.read(upTo: want) }
          while true {
            guard let out = decoder.pull(upTo: want) else {
              throw StoreError.internalError("attachment blob \(name) is not gzip")
            }
            if !out.isEmpty || decoder.isFinished { return out }
            let input = try reader.read(upTo: chunk)
            if input.isEmpty { return [] }
            decoder.push(input)
          }
        }
        if piece.isEmpty {
          if !lengthKnown { break }
          throw StoreError.internalError("attachment blob for \(name) is shorter than recorded")
        }
        if piece.count > left { piece.removeLast(piece.count - left) }
        left -= piece.count
        try await writer.write(ByteBuffer(bytes: piece))
      }
      try await writer.finish(nil)
    }
    return Response(status: status, headers: headers, body: body)
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

  /// The byte ranges of a `Range: bytes=...` header, clamped to `length`, as
  /// `chttpd_db:parse_ranges` reads mochiweb's parse of it: nil to send the whole attachment
  /// (no header, one that does not parse, or a `0-` among the ranges). A range that ends before
  /// it starts, or starts past the end, is `416`.
  static func ranges(_ header: String, length: Int) throws(CouchError) -> [(Int, Int)]? {
    guard header.hasPrefix("bytes=") else { return nil }
    let unsatisfiable = CouchError(
      "requested_range_not_satisfiable", "Requested range not satisfiable", status: 416)
    var out: [(Int, Int)] = []
    for spec in header.dropFirst(6).split(separator: ",", omittingEmptySubsequences: false) {
      let trimmed = spec.trimmingCharacters(in: .whitespaces)
      guard let dash = trimmed.firstIndex(of: "-") else { return nil }
      let fromText = trimmed[..<dash]
      let toText = trimmed[trimmed.index(after: dash)...]
      var from: Int
      var to: Int
      if fromText.isEmpty {
        guard let n = Int(toText), n >= 0 else { return nil }
        from = max(0, length - n)
        to = length - 1
      } else {
        guard let f = Int(fromText), f >= 0 else { return nil }
        from = f
        if toText.isEmpty {
          if from == 0 { return nil }
          to = length - 1
        } else {
          guard let t = Int(toText), t >= 0 else { return nil }
          guard t >= from else { throw unsatisfiable }
          to = min(t, length - 1)
        }
      }
      guard from < length, from <= to else { throw unsatisfiable }
      out.append((from, to))
    }
    return out.isEmpty ? nil : out
  }
}
