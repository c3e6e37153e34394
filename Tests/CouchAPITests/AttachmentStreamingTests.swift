import AsyncHTTPClient
import CouchAPI
import CouchQuery
import CouchTestSupport
import Formats
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import JSON
import NIOCore
import NIOHTTP1
import Projections
import Query
import Replication
import RevTree
import Synchronization
import TestSupport
import Testing

/// `PUT` and `GET /db/doc/att` stream: the body goes to disk and the blob comes back a chunk
/// at a time, so the server's memory does not grow with the attachment.
@Suite struct AttachmentStreamingTests {
  /// The attachment of the large test: 100 MiB (the debug build's MD5, on both sides, makes
  /// 200 MiB take too long for the suite).
  static let largeBytes = 100 << 20
  /// What the server's peak resident memory may grow by: the 64 MiB, plus 16 MiB for
  /// what a first upload and download allocate once (thread pool stacks, NIO's buffers).
  static let allowedGrowth = (64 + 16) << 20

  @Test("a 100 MiB upload and download stream through wikilog serve with bounded memory")
  func largeRoundTrip() async throws {
    let path = NSTemporaryDirectory() + "wikilog-stream-\(UUID().uuidString)"
    defer { try? FileManager.default.removeItem(atPath: path) }
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    let (server, base) = try ChildProcess.serve(path)
    defer { server.kill() }
    let pid = server.process.processIdentifier
    #expect(try await httpStatus(.PUT, base + "/db", nil) == 201)
    let baseline = try #require(Self.memory(pid, "VmHWM"))

    let chunks = Chunks(total: Self.largeBytes)
    var put = HTTPClientRequest(url: base + "/db/big/data.bin")
    put.method = .PUT
    put.headers.add(name: "Content-Type", value: "application/octet-stream")
    put.body = .stream(chunks, length: .known(Int64(Self.largeBytes)))
    let response = try await HTTPClient.shared.execute(put, timeout: .seconds(120))
    let answer = try await response.body.collect(upTo: 1 << 16)
    #expect(response.status == .created, "\(String(buffer: answer))")
    let sentMD5 = chunks.md5

    // The stub's digest is the MD5 of the bytes sent (an identity type is stored as sent).
    let doc = try JSONValue(
      parsing: Array(try await get(base + "/db/big").readableBytesView))
    let stub = try #require(doc["_attachments"]?["data.bin"])
    #expect(stub["digest"]?.stringValue == "md5-" + Base64.encode(sentMD5))
    #expect(stub["length"]?.int == Self.largeBytes)

    // Downloaded a piece at a time, hashed as it comes.
    let download = try await HTTPClient.shared.execute(
      HTTPClientRequest(url: base + "/db/big/data.bin"), timeout: .seconds(120))
    #expect(download.status == .ok)
    #expect(download.headers.first(name: "Content-Length") == String(Self.largeBytes))
    var md5 = MD5()
    var received = 0
    for try await buffer in download.body {
      received += buffer.readableBytes
      md5.update(buffer.readableBytesView)
    }
    #expect(received == Self.largeBytes)
    #expect(md5.finalize().bytes == sentMD5, "the bytes come back as sent")

    // A range is read from its offset.
    var ranged = HTTPClientRequest(url: base + "/db/big/data.bin")
    ranged.headers.add(name: "Range", value: "bytes=\(Self.largeBytes - 10)-")
    let tail = try await HTTPClient.shared.execute(ranged, timeout: .seconds(30))
    #expect(tail.status == .partialContent)
    let tailBytes = Array(try await tail.body.collect(upTo: 100).readableBytesView)
    #expect(tailBytes == Array(chunks.expected(from: Self.largeBytes - 10, count: 10)))

    let peak = try #require(Self.memory(pid, "VmHWM"))
    #expect(
      peak - baseline < Self.allowedGrowth,
      "the server's peak RSS grew by \((peak - baseline) >> 20) MiB")
  }

  @Test("an attachment over maxAttachmentBytes is 413 attachment_too_large, nothing stored")
  func overLimit() async throws {
    var options = CouchServerOptions.standard
    options.maxAttachmentBytes = 1 << 20
    options.maxRequestBytes = 1000  // does not bound a standalone attachment
    try await withServer(.live, options: options) { client, dir in
      let base = "http://127.0.0.1:\(try #require(client.port))"
      try await client.call(.put, "/db")
      let blobs = dir.data.directory(of: "db") + "/attachments"
      // At the limit: stored.
      var exact = HTTPClientRequest(url: base + "/db/fits/a.bin")
      exact.method = .PUT
      exact.body = .stream(Chunks(total: 1 << 20), length: .known(Int64(1 << 20)))
      let fits = try await HTTPClient.shared.execute(exact, timeout: .seconds(30))
      _ = try await fits.body.collect(upTo: 1 << 16)
      #expect(fits.status == .created)
      #expect(try Self.files(blobs).count == 1)

      // Content-Length beyond the limit: refused before the body is read.
      var declared = HTTPClientRequest(url: base + "/db/big/a.bin")
      declared.method = .PUT
      declared.body = .stream(Chunks(total: 3 << 20), length: .known(Int64(3 << 20)))
      let refused = try await HTTPClient.shared.execute(declared, timeout: .seconds(30))
      let body = try await refused.body.collect(upTo: 1 << 16)
      #expect(refused.status == .payloadTooLarge)
      #expect(
        try JSONValue(parsing: Array(body.readableBytesView))["error"]?.stringValue
          == "attachment_too_large")

      // Chunked, no length: refused once the limit is passed, the temporary file removed.
      var chunked = HTTPClientRequest(url: base + "/db/big2/a.bin")
      chunked.method = .PUT
      chunked.body = .stream(Chunks(total: 3 << 20), length: .unknown)
      let r = try await HTTPClient.shared.execute(chunked, timeout: .seconds(30))
      _ = try await r.body.collect(upTo: 1 << 16)
      #expect(r.status == .payloadTooLarge)
      #expect(try await client.call(.get, "/db/big").code == 404)
      #expect(try await client.call(.get, "/db/big2").code == 404)
      let left = try Self.files(blobs)
      #expect(left.count == 1, "only the blob that fits: \(left)")
    }
  }

  @Test("an upload the client abandons leaves no blob, no temporary file and no revision")
  func aborted() async throws {
    try await withServer(.live) { client, dir in
      let base = "http://127.0.0.1:\(try #require(client.port))"
      try await client.call(.put, "/db")
      let blobs = dir.data.directory(of: "db") + "/attachments"
      for length in [HTTPClientRequest.Body.Length.known(Int64(8 << 20)), .unknown] {
        var put = HTTPClientRequest(url: base + "/db/gone/a.bin")
        put.method = .PUT
        put.body = .stream(Chunks(total: 8 << 20, failAfter: 3 << 20), length: length)
        await #expect(throws: (any Error).self) {
          let r = try await HTTPClient.shared.execute(put, timeout: .seconds(30))
          _ = try await r.body.collect(upTo: 1 << 16)
        }
      }
      // The server notices the connection is gone and cleans up.
      var left: [String] = []
      for _ in 0..<100 {
        left = try Self.files(blobs)
        if left.isEmpty { break }
        try await Task.sleep(for: .milliseconds(50))
      }
      #expect(left.isEmpty, "\(left)")
      #expect(try await client.call(.get, "/db/gone").code == 404)
      #expect(try await client.call(.get, "/db")["update_seq"] != nil)
      #expect(try await client.call(.get, "/db")["doc_count"]?.int == 0)
    }
  }

  @Test("a compressible type is gzipped as it streams in and inflated as it streams out")
  func compressibleStreams() async throws {
    try await withServer(.live) { client, dir in
      let base = "http://127.0.0.1:\(try #require(client.port))"
      try await client.call(.put, "/db")
      // 3 MiB of text: several chunks each way.
      let line = Array("the quick brown fox jumps over the lazy dog 0123456789\n".utf8)
      var text: [UInt8] = []
      while text.count < 3 << 20 { text += line }
      var put = HTTPClientRequest(url: base + "/db/t/a.txt")
      put.method = .PUT
      put.headers.add(name: "Content-Type", value: "text/plain")
      put.headers.add(name: "Content-MD5", value: Base64.encode(MD5.hash(text).bytes))
      put.body = .bytes(ByteBuffer(bytes: text))
      let r = try await HTTPClient.shared.execute(put, timeout: .seconds(30))
      let answer = try await r.body.collect(upTo: 1 << 16)
      #expect(r.status == .created, "\(String(buffer: answer))")
      let info = try await client.call(.get, "/db/t?att_encoding_info=true")
      let stub = try #require(info["_attachments"]?["a.txt"])
      let gzip = AttachmentEncoding.gzip(text)
      #expect(stub["encoding"]?.stringValue == "gzip")
      #expect(stub["length"]?.int == text.count)
      #expect(stub["encoded_length"]?.int == gzip.count)
      #expect(stub["digest"]?.stringValue == "md5-" + Base64.encode(MD5.hash(gzip).bytes))
      // (The test client, not AsyncHTTPClient, which asks for gzip and inflates it.)
      let plain = try await client.raw(.get, "/db/t/a.txt")
      #expect(plain.headers[.contentEncoding] == nil)
      #expect(plain.headers[.contentLength] == String(text.count))
      #expect(plain.bytes == text)
      var accept = HTTPFields()
      accept[.acceptEncoding] = "gzip"
      let g = try await client.raw(.get, "/db/t/a.txt", headers: accept)
      #expect(g.headers[.contentEncoding] == "gzip")
      #expect(g.bytes == gzip)

      // A wrong Content-MD5 stores nothing.
      var bad = HTTPClientRequest(url: base + "/db/t2/a.txt")
      bad.method = .PUT
      bad.headers.add(name: "Content-Type", value: "text/plain")
      bad.headers.add(name: "Content-MD5", value: Base64.encode(MD5.hash([1]).bytes))
      bad.body = .bytes(ByteBuffer(bytes: text + [1]))
      let b = try await HTTPClient.shared.execute(bad, timeout: .seconds(30))
      _ = try await b.body.collect(upTo: 1 << 16)
      #expect(b.status == .badRequest)
      #expect(try Self.files(dir.data.directory(of: "db") + "/attachments").count == 1)
    }
  }

  /// The entries of directory `path` ([] when it does not exist).
  static func files(_ path: String) throws -> [String] {
    guard FileManager.default.fileExists(atPath: path) else { return [] }
    return try FileManager.default.contentsOfDirectory(atPath: path)
  }

  /// A `kB` line of `/proc/<pid>/status` (`VmRSS`, `VmHWM`), in bytes.
  static func memory(_ pid: Int32, _ key: String) -> Int? {
    guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else {
      return nil
    }
    for line in text.split(separator: "\n") where line.hasPrefix(key + ":") {
      let digits = line.dropFirst(key.count + 1).filter(\.isNumber)
      return Int(digits).map { $0 << 10 }
    }
    return nil
  }
}

/// The body of a GET, collected (small ones only).
private func get(_ url: String) async throws -> ByteBuffer {
  let response = try await HTTPClient.shared.execute(
    HTTPClientRequest(url: url), timeout: .seconds(30))
  return try await response.body.collect(upTo: 16 << 20)
}

/// `total` bytes in 1 MiB chunks, each a fixed random block stamped with its index (so no two
/// chunks are alike), hashed as they are produced; with `failAfter`, an error once that many
/// bytes are out (a client that gives up).
final class Chunks: AsyncSequence, Sendable {
  typealias Element = ByteBuffer
  static let chunk = 1 << 20
  static let block: [UInt8] = {
    var g = SystemRandomNumberGenerator()
    return (0..<chunk).map { _ in UInt8.random(in: 0...255, using: &g) }
  }()
  let total: Int
  let failAfter: Int?
  private let hash = Mutex(MD5())

  init(total: Int, failAfter: Int? = nil) {
    self.total = total
    self.failAfter = failAfter
  }

  var md5: [UInt8] {
    hash.withLock {
      var copy = $0
      return copy.finalize().bytes
    }
  }

  /// Chunk `i`.
  static func chunk(_ i: Int, count: Int) -> [UInt8] {
    var bytes = Array(block[0..<count])
    withUnsafeBytes(of: UInt64(i).littleEndian) { stamp in
      for j in 0..<Swift.min(8, count) { bytes[j] = stamp[j] }
    }
    return bytes
  }

  /// `count` bytes of the sequence from `offset`.
  func expected(from offset: Int, count: Int) -> ArraySlice<UInt8> {
    let i = offset / Self.chunk
    let within = offset % Self.chunk
    return Self.chunk(i, count: Self.chunk)[within..<within + count]
  }

  struct AsyncIterator: AsyncIteratorProtocol {
    let owner: Chunks
    var sent = 0
    mutating func next() async throws -> ByteBuffer? {
      if let fail = owner.failAfter, sent >= fail { throw CancellationError() }
      guard sent < owner.total else { return nil }
      let count = Swift.min(Chunks.chunk, owner.total - sent)
      let bytes = Chunks.chunk(sent / Chunks.chunk, count: count)
      owner.hash.withLock { $0.update(bytes) }
      sent += count
      return ByteBuffer(bytes: bytes)
    }
  }

  func makeAsyncIterator() -> AsyncIterator { AsyncIterator(owner: self) }
}
