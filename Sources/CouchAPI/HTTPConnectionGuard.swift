import Foundation
import HTTPTypes
public import HummingbirdCore
import JSON
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import Synchronization

/// Limits on the server's connections: how long a client may take to send a request's head, and
/// how many connections may be open at once.
///
/// `wikilog serve --header-timeout` and `--max-connections` set them.
///
/// ```swift
/// let server = HTTPServerBuilder.couchHTTP1(limits: ConnectionLimits(headerTimeout: .seconds(10)))
/// ```
public struct ConnectionLimits: Sendable {
  /// How long a connection may wait for a complete request head: from the connection's start,
  /// and after each response, until the next head has arrived. A client that trickles its
  /// headers (or keeps a connection open without asking anything) is disconnected then.
  public var headerTimeout: Duration
  /// Connections open at once; a connection beyond them gets a `503` and is closed.
  public var maxConnections: Int

  public init(headerTimeout: Duration = .seconds(60), maxConnections: Int = 2048) {
    self.headerTimeout = headerTimeout
    self.maxConnections = maxConnections
  }
}

extension HTTPServerBuilder {
  /// Hummingbird's HTTP/1.1 server with wikilog's connection guard: CouchDB-style
  /// `{"error","reason"}` bodies for requests the HTTP parser refuses (Hummingbird's own answer
  /// is an empty `400`), the header time-out and the connection limit of `limits`.
  public static func couchHTTP1(limits: ConnectionLimits = ConnectionLimits()) -> HTTPServerBuilder
  {
    let open = OpenConnections()
    return .http1(
      configuration: HTTP1Channel.Configuration(
        additionalChannelHandlers: [HTTPConnectionGuard(limits: limits, open: open)]))
  }
}

/// A request body that ended before its framing said it would: the connection closed in the
/// middle of it, or the parser refused what followed. Its reader fails with this error.
struct IncompleteRequestBody: Error, CustomStringConvertible {
  let reason: String
  var description: String { reason }
}

/// The number of open connections, shared by every connection's guard.
final class OpenConnections: Sendable {
  let count = Atomic<Int>(0)
}

/// One connection's guard, after the HTTP codec: answers parser errors with a JSON body, closes
/// a connection whose request head does not arrive in time, and refuses connections beyond the
/// limit.
final class HTTPConnectionGuard: ChannelDuplexHandler, RemovableChannelHandler {
  typealias InboundIn = HTTPRequestPart
  typealias InboundOut = HTTPRequestPart
  typealias OutboundIn = HTTPResponsePart
  typealias OutboundOut = HTTPResponsePart

  let limits: ConnectionLimits
  let open: OpenConnections
  private var counted = false
  private var overLimit = false
  private var headTimer: Scheduled<Void>?
  private var answered = false
  /// Requests whose head has arrived and whose response has not ended (pipelined requests).
  private var inFlight = 0
  /// A request's head was passed on and its end has not arrived yet: its body is being read.
  private var bodyOpen = false

  init(limits: ConnectionLimits, open: OpenConnections) {
    self.limits = limits
    self.open = open
  }

  func handlerAdded(context: ChannelHandlerContext) {
    let now = open.count.add(1, ordering: .relaxed).newValue
    counted = true
    overLimit = now > limits.maxConnections
    armHeadTimer(context: context)
  }

  func handlerRemoved(context: ChannelHandlerContext) {
    headTimer?.cancel()
    headTimer = nil
    if counted {
      open.count.subtract(1, ordering: .relaxed)
      counted = false
    }
  }

  func channelRead(context: ChannelHandlerContext, data: NIOAny) {
    let part = unwrapInboundIn(data)
    if case .end = part { bodyOpen = false }
    if case .head(let request) = part {
      inFlight += 1
      headTimer?.cancel()
      headTimer = nil
      if overLimit {
        answer(
          context: context, status: .serviceUnavailable, error: "service_unavailable",
          reason:
            "The server has \(limits.maxConnections) connections open, its limit; try again later.")
        return
      }
      if Self.hasBody(request) { Self.acknowledgeNow(context) }
      // `Expect: 100-continue`: the client waits for a `100 Continue` before it sends the body
      // (curl for a second, then sends anyway); mochiweb sends it too.
      if !answered,
        request.headerFields[.expect]?.lowercased().trimmingCharacters(in: .whitespaces)
          == "100-continue"
      {
        context.writeAndFlush(
          wrapOutboundOut(.head(HTTPResponse(status: .continue))), promise: nil)
      }
    }
    guard !answered else { return }
    if case .head = part { bodyOpen = true }
    context.fireChannelRead(data)
  }

  func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
    // After this guard's own answer, the connection is closing: a response the application
    // writes too (to a request whose body was cut short) must not follow it on the wire.
    if answered {
      promise?.fail(ChannelError.ioOnClosedChannel)
      return
    }
    if case .end = unwrapOutboundIn(data) {
      inFlight = max(0, inFlight - 1)
      if inFlight == 0 { armHeadTimer(context: context) }
    }
    context.write(data, promise: promise)
  }

  func errorCaught(context: ChannelHandlerContext, error: any Error) {
    guard let parserError = error as? HTTPParserError else {
      context.fireErrorCaught(error)
      return
    }
    headTimer?.cancel()
    headTimer = nil
    if parserError == .invalidMethod {
      // A method the parser does not know (`FOO`, `get`): CouchDB answers 405 for any method
      // its handlers do not take.
      answer(
        context: context, status: .methodNotAllowed, error: "method_not_allowed",
        reason: "Only DELETE,GET,HEAD,POST,PUT,COPY allowed (methods are upper case)")
      return
    }
    answer(
      context: context, status: .badRequest, error: "bad_request",
      reason: Self.reason(parserError))
    if bodyOpen {
      // The request's body stopped in the middle (a Content-Length or a chunk larger than what
      // came, or no last chunk, then the end of the connection): its reader gets an error, not
      // the end of a shorter body, so that nothing is written from a request that never fully
      // arrived.
      bodyOpen = false
      context.fireErrorCaught(IncompleteRequestBody(reason: Self.reason(parserError)))
    }
  }

  /// Whether a request head announces a body (a Content-Length above 0, or chunked).
  static func hasBody(_ request: HTTPRequest) -> Bool {
    if let length = request.headerFields[.contentLength] { return length != "0" }
    return request.headerFields[.transferEncoding] != nil
  }

  /// Acknowledges what has arrived at once (`TCP_QUICKACK`) instead of after the delayed-ACK
  /// timer. A client that writes a request's head and its body in two sends with Nagle's
  /// algorithm on (Erlang's ibrowse, which CouchDB's replicator uses, does) holds the body until
  /// the head is acknowledged; the server has nothing to send before it has the body, so the
  /// kernel's delayed ACK made each such request wait 40 ms. Linux clears the flag by itself,
  /// so it is set again for every request with a body.
  static func acknowledgeNow(_ context: ChannelHandlerContext) {
    #if os(Linux)
      guard let options = context.channel.syncOptions else { return }
      try? options.setOption(
        ChannelOptions.tcpOption(.init(rawValue: quickAck)), value: 1)
    #endif
  }

  #if os(Linux)
    /// `TCP_QUICKACK` (linux/tcp.h).
    static let quickAck: Int32 = 12
  #endif

  /// Arms the head time-out, replacing any armed before.
  private func armHeadTimer(context: ChannelHandlerContext) {
    headTimer?.cancel()
    let nanoseconds =
      limits.headerTimeout.components.seconds * 1_000_000_000
      + limits.headerTimeout.components.attoseconds / 1_000_000_000
    headTimer = context.eventLoop.assumeIsolated().scheduleTask(
      in: .nanoseconds(max(1, nanoseconds))
    ) {
      context.close(promise: nil)
    }
  }

  /// Writes a complete JSON error response and closes the connection after it.
  private func answer(
    context: ChannelHandlerContext, status: HTTPResponse.Status, error: String, reason: String
  ) {
    guard !answered else { return }
    answered = true
    let json = JSONValue.object(JSONObject(["error": .string(error), "reason": .string(reason)]))
    let body = json.serialized() + [UInt8(ascii: "\n")]
    var head = HTTPResponse(status: status)
    head.headerFields[.contentType] = "application/json"
    head.headerFields[.contentLength] = String(body.count)
    head.headerFields[.connection] = "close"
    head.headerFields[.server] = CouchServer.serverHeader
    context.write(wrapOutboundOut(.head(head)), promise: nil)
    context.write(wrapOutboundOut(.body(ByteBuffer(bytes: body))), promise: nil)
    context.writeAndFlush(wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { _ in
      context.close(promise: nil)
    }
  }

  /// What the parser refused, in words.
  static func reason(_ error: HTTPParserError) -> String {
    let what =
      switch error {
      case .headerOverflow: "its headers are too large or too many"
      case .invalidMethod: "its method is not a valid HTTP method (methods are upper case)"
      case .invalidURL, .invalidPath, .invalidQueryString, .invalidFragment, .invalidHost,
        .invalidPort:
        "its request target is not a valid URL"
      case .invalidVersion: "its HTTP version is not valid"
      case .invalidContentLength: "its Content-Length is not a valid number"
      case .unexpectedContentLength:
        "it has a Content-Length together with chunked Transfer-Encoding, or two lengths"
      case .invalidChunkSize: "a chunk size of its chunked body is not valid"
      case .invalidHeaderToken, .invalidCharactersUsed:
        "a header line is malformed (each is `Name: value`)"
      case .lfExpected, .invalidConstant, .strictModeAssertion:
        "its request line or headers are malformed"
      case .trailingGarbage: "it is followed by bytes that are not a request"
      case .invalidEOFState, .closedConnection: "the connection ended in the middle of it"
      case .unknown:
        "its framing is malformed (a Content-Length together with chunked Transfer-Encoding, for one)"
      default: "the HTTP parser refused it (\(error))"
      }
    return "The request could not be read: " + what + "."
  }
}
