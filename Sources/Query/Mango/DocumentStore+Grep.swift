import Formats
import Foundation
public import JSON
public import Log
public import Projections
import RevTree

/// One field value a ``DocumentStore/grep(_:field:type:history:visible:_:)`` found.
public struct GrepMatch: Sendable, Hashable {
  public let docID: String
  public let rev: String
  /// The field's dotted path (array elements by index: `tags.0`).
  public let field: String
  /// The value: a string as it is, anything else as JSON.
  public let value: String
  /// With `history`: who wrote the revision, and when (µs since 1970).
  public let actor: String?
  public let timestampMicroseconds: Int64?
  public let seq: LogPosition?

  public var json: JSONValue {
    var members: [JSONObject.Member] = [
      .init(key: "id", value: .string(docID)), .init(key: "rev", value: .string(rev)),
      .init(key: "field", value: .string(field)), .init(key: "value", value: .string(value)),
    ]
    if let actor { members.append(.init(key: "actor", value: .string(actor))) }
    if let timestampMicroseconds {
      let date = Date(timeIntervalSince1970: Double(timestampMicroseconds) / 1_000_000)
      members.append(.init(key: "time", value: .string(ISO8601.format(date))))
    }
    if let seq {
      members.append(.init(key: "seq", value: .number(JSONNumber(Int64(seq.rawValue)))))
    }
    return .object(JSONObject(members))
  }
}

extension DocumentStore {
  func grep(
    _ pattern: RegexPattern, field: String? = nil, type: String? = nil,
    history: Bool = false, visible: DocumentFilter? = nil, _ body: (GrepMatch) throws -> Bool
  ) throws {
    let path = field.map(Selector.path)
    func search(
      _ id: String, _ rev: String, _ doc: JSONValue, actor: String?, time: Int64?,
      seq: LogPosition?
    ) throws -> Bool {
      if let type, doc["type"]?.stringValue != type { return true }
      var leaves: [(String, JSONValue)] = []
      if let path {
        if let v = Selector.value(at: path, in: doc) { Self.leaves(v, field!, into: &leaves) }
      } else if let object = doc.objectValue {
        for m in object.members { Self.leaves(m.value, m.key, into: &leaves) }
      }
      for (name, value) in leaves {
        let text = value.stringValue ?? value.serializedString
        guard pattern.matches(text) else { continue }
        let match = GrepMatch(
          docID: id, rev: rev, field: name, value: text, actor: actor,
          timestampMicroseconds: time, seq: seq)
        if try !body(match) { return false }
      }
      return true
    }
    try read { txn in
      if history {
        try txn.forEachEvent(from: LogPosition(1)) { event in
          guard let kind = DocumentEvent.Kind(eventType: event.type),
            kind == .edit || kind == .replicated
          else { return true }
          let e = try DocumentEvent(decoding: event)
          if e.deleted { return true }
          if let visible, !visible.includes(e.docID) { return true }
          guard let doc = try? JSONValue(parsing: e.body) else { return true }
          return try search(
            e.docID, e.rev, doc, actor: event.actor, time: event.timestampMicroseconds,
            seq: event.position)
        }
      } else {
        try scanRecords(from: nil, txn: txn) { _, value in
          let record = try DocumentRecord(decoding: value)
          if let visible, !visible.includes(record.docID) { return true }
          guard let winner = record.tree.winner, winner.status == .available,
            let at = winner.body
          else { return true }
          let doc = JSONValue.object(try self.body(at: at, txn: txn))
          return try search(
            record.docID, winner.rev.description, doc, actor: nil, time: nil, seq: nil)
        }
      }
    }
  }

  /// The scalar values under `value`, with their dotted paths.
  static func leaves(_ value: JSONValue, _ path: String, into out: inout [(String, JSONValue)]) {
    switch value {
    case .object(let o):
      for m in o.members {
        leaves(m.value, path + "." + m.key.replacingOccurrences(of: ".", with: "\\."), into: &out)
      }
    case .array(let items):
      for (i, item) in items.enumerated() { leaves(item, "\(path).\(i)", into: &out) }
    default:
      out.append((path, value))
    }
  }
}
