public import Log
import RevTree

/// Why a document operation failed, in CouchDB's terms: an error name, a reason and the HTTP
/// status CouchDB answers with. The HTTP layer renders `{"error": name, "reason": reason}`.
public struct StoreError: Error, Sendable, Hashable, CustomStringConvertible {
  /// CouchDB's error name: `bad_request`, `not_found`, `conflict`, `forbidden`, ...
  public let error: String
  public let reason: String
  public let status: Int

  public init(_ error: String, _ reason: String, status: Int) {
    self.error = error
    self.reason = reason
    self.status = status
  }

  public var description: String { "\(error): \(reason)" }

  public static func badRequest(_ reason: String) -> StoreError {
    StoreError("bad_request", reason, status: 400)
  }
  public static func notFound(_ reason: String = "missing") -> StoreError {
    StoreError("not_found", reason, status: 404)
  }
  public static let conflict = StoreError("conflict", "Document update conflict.", status: 409)
  public static func forbidden(_ reason: String) -> StoreError {
    StoreError("forbidden", reason, status: 403)
  }
  public static func invalidDocument(_ reason: String) -> StoreError {
    StoreError("doc_validation", reason, status: 400)
  }
  public static func tooLarge(_ reason: String) -> StoreError {
    StoreError("too_large", reason, status: 413)
  }

  /// A storage failure from the log.
  public static func storage(_ error: LogError) -> StoreError {
    switch error {
    case .closed: StoreError("service_unavailable", error.description, status: 503)
    case .readOnly: StoreError("forbidden", error.description, status: 403)
    case .diskFull, .mapFull: StoreError("insufficient_storage", error.description, status: 507)
    default: StoreError("internal_server_error", error.description, status: 500)
    }
  }

  static func from(_ error: any Error) -> StoreError {
    switch error {
    case let e as StoreError: e
    case let e as LogError: .storage(e)
    case let e as RevTreeError:
      if case .conflict = e { .conflict } else { .badRequest(e.description) }
    case let e as RevIDError: .badRequest("Invalid rev format: \(e)")
    case let e as JSONParseError: .badRequest("invalid UTF-8 JSON: \(e)")
    default: StoreError("internal_server_error", "\(error)", status: 500)
    }
  }
}
