import AsyncHTTPClient
import NIOCore
import NIOPosix

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// The usual ways a request to a peer fails, in plain words: what the Sync page, `wikilog
/// replicate` and `_scheduler/jobs` show while a peer is unreachable.
enum NetworkFailure {
  /// `error` in words, nil when it is not a network failure this knows.
  static func describe(_ error: any Error) -> String? {
    switch error {
    case let failure as NIOConnectionError:
      let reasons = failure.connectionErrors.map { describe($0.error) ?? "\($0.error)" }
      let reason =
        reasons.first
        ?? (failure.dnsAError ?? failure.dnsAAAAError).map { _ in "the name does not resolve" }
        ?? "no address answered"
      return "cannot connect to \(failure.host):\(failure.port): \(reason)"
    case let io as IOError:
      return text(errno: io.errnoCode)
    case let client as HTTPClientError:
      switch client {
      case .connectTimeout: return "connecting timed out"
      case .readTimeout: return "no answer within the read timeout"
      case .remoteConnectionClosed: return "the peer closed the connection"
      case .deadlineExceeded: return "the request took longer than its deadline"
      default: return nil
      }
    case let channel as ChannelError:
      switch channel {
      case .connectTimeout: return "connecting timed out"
      case .ioOnClosedChannel, .alreadyClosed, .eof: return "the peer closed the connection"
      default: return nil
      }
    default:
      return nil
    }
  }

  /// What an errno means for a connection.
  static func text(errno code: Int32) -> String {
    switch code {
    case ECONNREFUSED: return "connection refused"
    case ECONNRESET: return "connection reset by the peer"
    case ETIMEDOUT: return "timed out"
    case EHOSTUNREACH: return "host unreachable"
    case ENETUNREACH: return "network unreachable"
    case EPIPE: return "the connection broke"
    default: return "system error \(code)"
    }
  }
}
