import AsyncHTTPClient
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import NIOHTTP1
import Synchronization

/// An HTTP proxy for the replication tests that breaks requests on purpose: answers 500
/// without forwarding, forwards and then drops the connection before the answer (the upstream
/// did the work; the client does not know), forwards and sends only half of the body, or
/// forwards slowly. `fault(n, request)` picks what happens to the n-th request (from 0);
/// ``down`` makes every request fail with a dropped connection (an outage).
final class FaultProxy: HTTPResponder, Sendable {
  typealias Context = BasicRequestContext

  enum Fault: Sendable, Hashable {
    /// This status with a CouchDB error body, without forwarding.
    case status(Int)
    case dropAfterForwarding
    case truncate
    case slow
  }

  let upstream: Mutex<String>
  let fault: @Sendable (Int, Request) -> Fault?
  let count = Mutex(0)
  let injected = Mutex([Fault: Int]())
  let down = Mutex(false)

  init(upstream: String, fault: @escaping @Sendable (Int, Request) -> Fault?) {
    self.upstream = Mutex(upstream)
    self.fault = fault
  }

  /// Faults injected so far.
  var injectedCount: Int { injected.withLock { $0.values.reduce(0, +) } }

  func respond(to request: Request, context: Context) async throws -> Response {
    let n = count.withLock { value in
      defer { value += 1 }
      return value
    }
    if down.withLock({ $0 }) {
      return Response(status: .ok, body: ResponseBody { _ in throw CancellationError() })
    }
    let fault = self.fault(n, request)
    if let fault { injected.withLock { $0[fault, default: 0] += 1 } }
    if case .status(let code) = fault {
      var headers = HTTPFields()
      headers[.contentType] = "application/json"
      return Response(
        status: HTTPResponse.Status(code: code), headers: headers,
        body: ResponseBody(
          byteBuffer: ByteBuffer(string: #"{"error":"injected","reason":"fault proxy"}"#)))
    }
    if fault == .slow { try await Task.sleep(for: .milliseconds(300)) }
    var forwarded = HTTPClientRequest(url: upstream.withLock { $0 } + request.uri.string)
    forwarded.method = .init(rawValue: request.method.rawValue)
    for field in request.headers
    where field.name.canonicalName != "host" && field.name != .contentLength {
      forwarded.headers.add(name: field.name.rawName, value: field.value)
    }
    let body = try await request.body.collect(upTo: 1 << 30)
    if body.readableBytes > 0 { forwarded.body = .bytes(body) }
    let answer = try await HTTPClient.shared.execute(forwarded, timeout: .seconds(120))
    let bytes = try await answer.body.collect(upTo: 1 << 30)
    var headers = HTTPFields()
    headers[.contentType] = answer.headers.first(name: "Content-Type") ?? "application/json"
    let status = HTTPResponse.Status(code: Int(answer.status.code))
    switch fault {
    case .dropAfterForwarding:
      return Response(
        status: status, headers: headers, body: ResponseBody { _ in throw CancellationError() })
    case .truncate:
      let half = bytes.getSlice(at: bytes.readerIndex, length: bytes.readableBytes / 2)!
      return Response(
        status: status, headers: headers,
        body: ResponseBody(contentLength: bytes.readableBytes) { writer in
          try await writer.write(half)
          throw CancellationError()
        })
    default:
      return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: bytes))
    }
  }
}
