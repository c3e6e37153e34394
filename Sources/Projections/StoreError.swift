import JSON
public import Log
import RevTree

/// Why a document operation failed, in CouchDB's terms: an error name, a reason and a
/// ``Code`` that says what kind of failure it is. The HTTP layer picks the status for the code
/// and renders `{"error": name, "reason": reason}`.
public struct StoreError: Error, Sendable, Hashable, CustomStringConvertible {
  /// What kind of failure: the HTTP server answers each with CouchDB's status.
  public enum Code: Sendable, Hashable {
    /// Malformed input (400).
    case badRequest
    /// No such document, revision, database or projection (404).
    case notFound
    /// The revision named is not a current leaf, or the edit overlaps another (409).
    case conflict
    /// Refused: by validation, or a write to a read-only store (403).
    case forbidden
    /// Refused until the writer signs in as someone else (401: a `validate_doc_update` that
    /// throws `{unauthorized}`).
    case unauthorized
    /// Already there (412: a database that exists).
    case alreadyExists
    /// A precondition of the request does not hold (412: an attachment stub with nothing to
    /// stand for, CouchDB's `missing_stub`).
    case preconditionFailed
    /// Larger than the store accepts (413).
    case tooLarge
    /// The store is closed or going away (503).
    case unavailable
    /// The disk or the map is full (507).
    case insufficientStorage
    /// A CouchDB feature wikilog does not have (501).
    case notImplemented
    /// A failure of the store itself (500).
    case internalError
  }

  /// CouchDB's error name: `bad_request`, `not_found`, `conflict`, `forbidden`, ...
  public let error: String
  public let reason: String
  public let code: Code
  /// What a caller needs beyond the reason, set by the module that threw the error (the wiki's
  /// draft conflicts carry their texts); not part of equality.
  public var detail: (any Sendable)?

  public init(_ error: String, _ reason: String, code: Code) {
    self.error = error
    self.reason = reason
    self.code = code
    self.detail = nil
  }

  public static func == (a: StoreError, b: StoreError) -> Bool {
    a.error == b.error && a.reason == b.reason && a.code == b.code
  }

  public func hash(into hasher: inout Hasher) {
    hasher.combine(error)
    hasher.combine(reason)
    hasher.combine(code)
  }

  public var description: String { "\(error): \(reason)" }

  public static func badRequest(_ reason: String) -> StoreError {
    StoreError("bad_request", reason, code: .badRequest)
  }
  /// `illegal_docid` (400): a document id CouchDB's `couch_doc:validate_docid` refuses.
  public static func illegalDocID(_ reason: String) -> StoreError {
    StoreError("illegal_docid", reason, code: .badRequest)
  }
  public static func notFound(_ reason: String = "missing") -> StoreError {
    StoreError("not_found", reason, code: .notFound)
  }
  public static let conflict = StoreError("conflict", "Document update conflict.", code: .conflict)
  public static func forbidden(_ reason: String) -> StoreError {
    StoreError("forbidden", reason, code: .forbidden)
  }
  /// `not_implemented`: "`feature` is not implemented by wikilog".
  public static func notImplemented(_ feature: String) -> StoreError {
    StoreError("not_implemented", "\(feature) is not implemented by wikilog", code: .notImplemented)
  }
  public static func invalidDocument(_ reason: String) -> StoreError {
    StoreError("doc_validation", reason, code: .badRequest)
  }
  /// A `forbidden` refusal by document validation, as CouchDB answers when a
  /// `validate_doc_update` function throws `{forbidden: reason}`.
  public static func validation(_ reason: String) -> StoreError {
    StoreError("forbidden", reason, code: .forbidden)
  }
  public static func tooLarge(_ reason: String) -> StoreError {
    StoreError("too_large", reason, code: .tooLarge)
  }
  /// A failure of the store itself (`internal_server_error`).
  public static func internalError(_ reason: String) -> StoreError {
    StoreError("internal_server_error", reason, code: .internalError)
  }

  /// A storage failure from the log.
  /// A failure of the log, in CouchDB's terms; ``detail`` keeps the ``LogError`` (whose
  /// ``LogError/path`` a server leaves out of what it answers).
  public static func storage(_ error: LogError) -> StoreError {
    var e = storageError(error)
    e.detail = error
    return e
  }

  private static func storageError(_ error: LogError) -> StoreError {
    switch error {
    case .closed: StoreError("service_unavailable", error.description, code: .unavailable)
    case .readOnly: StoreError("forbidden", error.description, code: .forbidden)
    case .inUse: StoreError("conflict", error.description, code: .conflict)
    case .diskFull, .mapFull:
      StoreError("insufficient_storage", error.description, code: .insufficientStorage)
    case .damaged, .corruptDatabase:
      StoreError("database_damaged", error.description, code: .internalError)
    default: .internalError(error.description)
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
    default: .internalError("\(error)")
    }
  }
}

extension StoreError.Code {
  /// The HTTP status CouchDB answers this kind of failure with.
  public var httpStatus: Int {
    switch self {
    case .badRequest: 400
    case .notFound: 404
    case .conflict: 409
    case .forbidden: 403
    case .unauthorized: 401
    case .alreadyExists, .preconditionFailed: 412
    case .tooLarge: 413
    case .unavailable: 503
    case .insufficientStorage: 507
    case .notImplemented: 501
    case .internalError: 500
    }
  }
}
