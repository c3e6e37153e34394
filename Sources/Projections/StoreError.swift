import JSON
public import Log
import RevTree

/// Why a document operation failed, in CouchDB's terms: an error name, a reason and the HTTP
/// status CouchDB answers with. The HTTP layer renders `{"error": name, "reason": reason}`.
public struct StoreError: Error, Sendable, Hashable, CustomStringConvertible {
  /// CouchDB's error name: `bad_request`, `not_found`, `conflict`, `forbidden`, ...
  public let error: String
  public let reason: String
  public let status: Int
  /// For a draft that cannot be published because its edits overlap changes made since its
  /// base revision (a 409 `conflict`): the texts a UI needs to show the conflict.
  public internal(set) var draftConflict: DraftConflict?

  public init(_ error: String, _ reason: String, status: Int) {
    self.error = error
    self.reason = reason
    self.status = status
    self.draftConflict = nil
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
  /// A `forbidden` (403) refusal by document validation, as CouchDB answers when a
  /// `validate_doc_update` function throws `{forbidden: reason}`.
  public static func validation(_ reason: String) -> StoreError {
    StoreError("forbidden", reason, status: 403)
  }
  /// A draft that cannot be published (409 `conflict`), carrying the texts.
  public static func draftConflict(_ conflict: DraftConflict) -> StoreError {
    var error = StoreError(
      "conflict",
      "The draft of '\(conflict.pageID)' overlaps changes made since its base revision.",
      status: 409)
    error.draftConflict = conflict
    return error
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
