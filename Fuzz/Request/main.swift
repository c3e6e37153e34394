import CouchAPI
import CouchQuery
// libFuzzer target: whole HTTP requests through the server in process — routing, query
// parameters, headers, JSON bodies, `_bulk_docs` with `new_edits: false` and its `_revisions`,
// attachments, multipart. Every request gets a response (an error is a response); none crash.
// The server serves a wiki data directory in a temporary folder with a database `db` (writes
// unsynced: durability is not what this target looks at).
//
// Input: byte 0 picks the method, byte 1 the content type, then the request target up to the
// first newline (prefixed with `/db` unless it starts with `/`), then the body.
import Dispatch
import Foundation
import FuzzDriver
import HTTPTypes
import Hummingbird
import Log
import Logging
import NIOCore
import NIOEmbedded
import Projections
import Query
import Replication
import Wiki

let methods: [HTTPRequest.Method] = [
  .get, .put, .post, .delete, .head, HTTPRequest.Method("COPY")!, .get, .post,
]
let contentTypes = [
  "application/json", "multipart/related; boundary=abc", "text/plain", "",
  "application/x-www-form-urlencoded", "multipart/mixed; boundary=\"x y\"",
]

final class Fixture: @unchecked Sendable {
  /// The server's one pipeline, as a request from a socket meets it (its middlewares render
  /// errors as CouchDB's `{"error","reason"}`).
  let pipeline: CouchPipeline
  let context: CouchRequestContext
  /// Kept, so that the leak checker does not take the channel (and its pipeline, which refer
  /// to each other) for a leak of the first input.
  let channel = EmbeddedChannel()

  init() {
    let path = NSTemporaryDirectory() + "wikilog-fuzz-request-\(getpid())"
    try? FileManager.default.removeItem(atPath: path)
    try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    var options = EventLog.Options()
    options.durability = .unsynced
    let data = DataDirectory.wiki(path: path, options: options)
    _ = try? data.create("db")
    let quiet = Logger(label: "fuzz") { _ in SwiftLogNoOpLogHandler() }
    pipeline = CouchPipeline(
      couch: CouchServer(dataDirectory: data, options: .withQuery, logger: quiet))
    context = CouchRequestContext(
      source: ApplicationRequestContextSource(channel: channel, logger: quiet))
  }
}

let fixture = Fixture()

/// Collects a response body, up to a bound (a feed that never ends is cut off).
struct Drain: ResponseBodyWriter {
  var count = 0
  mutating func write(_ buffer: ByteBuffer) async throws {
    count += buffer.readableBytes
    if count > 8 << 20 { throw CancellationError() }
  }
  consuming func finish(_ trailingHeaders: HTTPFields?) async throws {}
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRequest(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
  let bytes = Array(UnsafeBufferPointer(start: data, count: size))
  guard bytes.count >= 2 else { return 0 }
  let method = methods[Int(bytes[0]) % methods.count]
  let contentType = contentTypes[Int(bytes[1]) % contentTypes.count]
  let rest = bytes[2...]
  let newline = rest.firstIndex(of: UInt8(ascii: "\n")) ?? rest.endIndex
  var target = String(decoding: rest[..<newline], as: UTF8.self)
  let body = newline < rest.endIndex ? Array(rest[(newline + 1)...]) : []
  if !target.hasPrefix("/") { target = "/db/" + target }
  // Feeds that wait (longpoll, continuous, eventsource) would hold every run for their timeout.
  if target.contains("feed") || target.contains("_replicate") { return 0 }
  // Deleting the database would leave nothing for later inputs to reach.
  if method == .delete, !target.dropFirst().contains("/") { return 0 }
  var head = HTTPRequest(method: method, scheme: "http", authority: "localhost", path: target)
  if !contentType.isEmpty { head.headerFields[.contentType] = contentType }
  if !body.isEmpty { head.headerFields[.contentLength] = String(body.count) }
  let request = Request(head: head, body: RequestBody(buffer: ByteBuffer(bytes: body)))
  let done = DispatchSemaphore(value: 0)
  let task = Task {
    if let response = try? await fixture.pipeline.respond(to: request, context: fixture.context) {
      _ = try? await response.body.write(Drain())
    }
    done.signal()
  }
  DispatchQueue.global().asyncAfter(deadline: .now() + 2) { task.cancel() }
  done.wait()
  return 0
}

runFuzzer(fuzzRequest)
