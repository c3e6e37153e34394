import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// A blocking POSIX socket client with Nagle's algorithm left on (the default), which writes
/// each request's head and body in two `send`s on one keep-alive connection.
public enum NagleClient {
  public struct Failure: Error {}

  public static func requestTimes(port: Int, count: Int) throws -> [Duration] {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw Failure() }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let connected = withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
      }
    }
    guard connected == 0 else { throw Failure() }
    var timeout = timeval(tv_sec: 10, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    func send(_ text: String) throws {
      let bytes = Array(text.utf8)
      guard Glibc.send(fd, bytes, bytes.count, 0) == bytes.count else { throw Failure() }
    }
    var times: [Duration] = []
    let clock = ContinuousClock()
    for i in 0..<count {
      let body = #"{"docs":[{"id":"d\#(i % 5)"}]}"#
      let start = clock.now
      try send(
        "POST /db/_bulk_get HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
          + "Content-Length: \(body.utf8.count)\r\n\r\n")
      try send(body)
      // The answer: its head, then the body its Content-Length or last chunk ends.
      var received: [UInt8] = []
      var buffer = [UInt8](repeating: 0, count: 65536)
      func complete() -> Bool {
        let text = String(decoding: received, as: UTF8.self)
        guard let end = text.range(of: "\r\n\r\n") else { return false }
        let head = text[..<end.lowerBound].lowercased()
        let rest = text[end.upperBound...]
        if let line = head.split(separator: "\r\n").first(where: {
          $0.hasPrefix("content-length:")
        }), let length = Int(line.dropFirst(15).trimmingCharacters(in: .whitespaces)) {
          return rest.utf8.count >= length
        }
        return rest.hasSuffix("0\r\n\r\n")
      }
      while !complete() {
        let n = recv(fd, &buffer, buffer.count, 0)
        guard n > 0 else { throw Failure() }
        received += buffer[0..<n]
      }
      times.append(clock.now - start)
    }
    return times
  }
}
