import Formats
import Foundation
public import JSON

/// Encodes an `Encodable` value straight into a `JSONValue` (no text in between), the way the
/// store keeps documents: `Date` as an ISO-8601 string with milliseconds (as the wiki and
/// JavaScript's `toISOString` write times), `Data` as Base64, `URL` as its absolute string,
/// `Decimal` as a number; `nil` optionals left out (``StoredDocument`` types use the synthesized
/// `encodeIfPresent`). A `Double` that is NaN or infinite is an error, as JSON has no such number.
///
/// ```swift
/// let value = try DocumentEncoder().encode(["due": Date(timeIntervalSince1970: 0)])
/// value.serialized()   // {"due":"1970-01-01T00:00:00.000Z"}
/// ```
public struct DocumentEncoder: Sendable {
  public init() {}

  /// `value` as JSON.
  public func encode(_ value: some Encodable) throws -> JSONValue {
    try encodeNoting(value).json
  }

  /// `value` as JSON, and whether it lost something a decoding will not give back (a date's
  /// fraction finer than the millisecond).
  func encodeNoting(_ value: some Encodable) throws -> (json: JSONValue, lossy: Bool) {
    let node = EncodedNode()
    let context = EncodingContext()
    try EncoderState.encodeValue(value, into: node, codingPath: [], context: context)
    return (node.json, context.lossy)
  }
}

/// What one encoding noticed on its way.
final class EncodingContext {
  var lossy = false
}

/// What one value became while it is being encoded: a container is filled in after it is
/// handed out, so it is a reference.
final class EncodedNode {
  enum Content {
    case none
    case value(JSONValue)
    case object([String], [String: EncodedNode])
    case array([EncodedNode])
  }
  var content: Content = .none

  var json: JSONValue {
    switch content {
    case .none: return .object(JSONObject())
    case .value(let v): return v
    case .object(let keys, let nodes):
      return .object(JSONObject(keys.map { JSONObject.Member(key: $0, value: nodes[$0]!.json) }))
    case .array(let nodes): return .array(nodes.map(\.json))
    }
  }

  /// The object member `key`, added when missing (a key encoded twice keeps its first place).
  func member(_ key: String) -> EncodedNode {
    var (keys, nodes): ([String], [String: EncodedNode])
    if case .object(let k, let n) = content {
      (keys, nodes) = (k, n)
    } else {
      (keys, nodes) = ([], [:])
    }
    if let node = nodes[key] { return node }
    let node = EncodedNode()
    keys.append(key)
    nodes[key] = node
    content = .object(keys, nodes)
    return node
  }

  func becomeObject() {
    if case .object = content { return }
    content = .object([], [:])
  }

  func appendElement() -> EncodedNode {
    var nodes: [EncodedNode] = []
    if case .array(let n) = content { nodes = n }
    let node = EncodedNode()
    nodes.append(node)
    content = .array(nodes)
    return node
  }

  func becomeArray() {
    if case .array = content { return }
    content = .array([])
  }

  var count: Int {
    if case .array(let n) = content { return n.count }
    return 0
  }
}

/// The `Encoder` handed to each value's `encode(to:)`.
struct EncoderState: Encoder {
  let node: EncodedNode
  let codingPath: [any CodingKey]
  let context: EncodingContext
  var userInfo: [CodingUserInfoKey: Any] { [:] }

  func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
    node.becomeObject()
    return KeyedEncodingContainer(Keyed<Key>(node: node, codingPath: codingPath, context: context))
  }

  func unkeyedContainer() -> any UnkeyedEncodingContainer {
    node.becomeArray()
    return Unkeyed(node: node, codingPath: codingPath, context: context)
  }

  func singleValueContainer() -> any SingleValueEncodingContainer {
    Single(node: node, codingPath: codingPath, context: context)
  }

  /// The JSON of a scalar the store writes in a form of its own, nil for any other value.
  static func special(
    _ value: some Encodable, codingPath: [any CodingKey], context: EncodingContext
  ) throws -> JSONValue? {
    switch value {
    case let date as Date:
      let millis = (date.timeIntervalSince1970 * 1000).rounded(.down)
      if Date(timeIntervalSince1970: millis / 1000) != date { context.lossy = true }
      return .string(ISO8601.format(microseconds: Int64(millis) * 1000, fractionDigits: 3))
    case let data as Data:
      return .string(Base64.encode(Array(data)))
    case let url as URL:
      return .string(url.absoluteString)
    case let decimal as Decimal:
      guard let number = JSONNumber(text: "\(decimal)") else {
        throw EncodingError.invalidValue(
          decimal,
          .init(codingPath: codingPath, debugDescription: "\(decimal) is not a JSON number"))
      }
      return .number(number)
    default:
      return nil
    }
  }

  static func encodeValue(
    _ value: some Encodable, into node: EncodedNode, codingPath: [any CodingKey],
    context: EncodingContext
  ) throws {
    if let json = try special(value, codingPath: codingPath, context: context) {
      node.content = .value(json)
      return
    }
    try value.encode(to: EncoderState(node: node, codingPath: codingPath, context: context))
  }

  static func number(_ value: Double, codingPath: [any CodingKey]) throws -> JSONValue {
    guard let number = JSONNumber(value) else {
      throw EncodingError.invalidValue(
        value, .init(codingPath: codingPath, debugDescription: "\(value) is not a JSON number"))
    }
    return .number(number)
  }

  static func number<T: BinaryInteger>(_ value: T) -> JSONValue {
    if let small = Int64(exactly: value) { return .number(JSONNumber(small)) }
    return .number(JSONNumber(text: String(value))!)
  }

  struct Keyed<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let node: EncodedNode
    let codingPath: [any CodingKey]
    let context: EncodingContext

    func set(_ value: JSONValue, _ key: Key) {
      node.member(key.stringValue).content = .value(value)
    }

    mutating func encodeNil(forKey key: Key) throws { set(.null, key) }
    mutating func encode(_ value: Bool, forKey key: Key) throws { set(.bool(value), key) }
    mutating func encode(_ value: String, forKey key: Key) throws { set(.string(value), key) }
    mutating func encode(_ value: Double, forKey key: Key) throws {
      set(try EncoderState.number(value, codingPath: codingPath + [key]), key)
    }
    mutating func encode(_ value: Float, forKey key: Key) throws {
      set(try EncoderState.number(Double(value), codingPath: codingPath + [key]), key)
    }
    mutating func encode(_ value: Int, forKey key: Key) throws {
      set(EncoderState.number(value), key)
    }
    mutating func encode(_ value: Int8, forKey key: Key) throws {
      set(EncoderState.number(value), key)
    }
    mutating func encode(_ value: Int16, forKey key: Key) throws {
      set(EncoderState.number(value), key)
    }
    mutating func encode(_ value: Int32, forKey key: Key) throws {
      set(EncoderState.number(value), key)
    }
    mutating func encode(_ value: Int64, forKey key: Key) throws {
      set(EncoderState.number(value), key)
    }
    mutating func encode(_ value: UInt, forKey key: Key) throws {
      set(EncoderState.number(value), key)
    }
    mutating func encode(_ value: UInt8, forKey key: Key) throws {
      set(EncoderState.number(value), key)
    }
    mutating func encode(_ value: UInt16, forKey key: Key) throws {
      set(EncoderState.number(value), key)
    }
    mutating func encode(_ value: UInt32, forKey key: Key) throws {
      set(EncoderState.number(value), key)
    }
    mutating func encode(_ value: UInt64, forKey key: Key) throws {
      set(EncoderState.number(value), key)
    }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
      let child = node.member(key.stringValue)
      child.content = .none
      try EncoderState.encodeValue(
        value, into: child, codingPath: codingPath + [key], context: context)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(
      keyedBy keyType: NestedKey.Type, forKey key: Key
    )
      -> KeyedEncodingContainer<NestedKey>
    {
      let child = node.member(key.stringValue)
      child.becomeObject()
      return KeyedEncodingContainer(
        Keyed<NestedKey>(node: child, codingPath: codingPath + [key], context: context))
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
      let child = node.member(key.stringValue)
      child.becomeArray()
      return Unkeyed(node: child, codingPath: codingPath + [key], context: context)
    }

    mutating func superEncoder() -> any Encoder {
      EncoderState(node: node.member("super"), codingPath: codingPath, context: context)
    }

    mutating func superEncoder(forKey key: Key) -> any Encoder {
      EncoderState(
        node: node.member(key.stringValue), codingPath: codingPath + [key], context: context)
    }
  }

  struct Unkeyed: UnkeyedEncodingContainer {
    let node: EncodedNode
    let codingPath: [any CodingKey]
    let context: EncodingContext
    var count: Int { node.count }

    func append(_ value: JSONValue) { node.appendElement().content = .value(value) }
    var nextKey: IndexKey { IndexKey(count) }

    mutating func encodeNil() throws { append(.null) }
    mutating func encode(_ value: Bool) throws { append(.bool(value)) }
    mutating func encode(_ value: String) throws { append(.string(value)) }
    mutating func encode(_ value: Double) throws {
      append(try EncoderState.number(value, codingPath: codingPath + [nextKey]))
    }
    mutating func encode(_ value: Float) throws {
      append(try EncoderState.number(Double(value), codingPath: codingPath + [nextKey]))
    }
    mutating func encode(_ value: Int) throws { append(EncoderState.number(value)) }
    mutating func encode(_ value: Int8) throws { append(EncoderState.number(value)) }
    mutating func encode(_ value: Int16) throws { append(EncoderState.number(value)) }
    mutating func encode(_ value: Int32) throws { append(EncoderState.number(value)) }
    mutating func encode(_ value: Int64) throws { append(EncoderState.number(value)) }
    mutating func encode(_ value: UInt) throws { append(EncoderState.number(value)) }
    mutating func encode(_ value: UInt8) throws { append(EncoderState.number(value)) }
    mutating func encode(_ value: UInt16) throws { append(EncoderState.number(value)) }
    mutating func encode(_ value: UInt32) throws { append(EncoderState.number(value)) }
    mutating func encode(_ value: UInt64) throws { append(EncoderState.number(value)) }
    mutating func encode<T: Encodable>(_ value: T) throws {
      let key = nextKey
      try EncoderState.encodeValue(
        value, into: node.appendElement(), codingPath: codingPath + [key], context: context)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type)
      -> KeyedEncodingContainer<NestedKey>
    {
      let key = nextKey
      let child = node.appendElement()
      child.becomeObject()
      return KeyedEncodingContainer(
        Keyed<NestedKey>(node: child, codingPath: codingPath + [key], context: context))
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
      let key = nextKey
      let child = node.appendElement()
      child.becomeArray()
      return Unkeyed(node: child, codingPath: codingPath + [key], context: context)
    }

    mutating func superEncoder() -> any Encoder {
      let key = nextKey
      return EncoderState(
        node: node.appendElement(), codingPath: codingPath + [key], context: context)
    }
  }

  struct Single: SingleValueEncodingContainer {
    let node: EncodedNode
    let codingPath: [any CodingKey]
    let context: EncodingContext

    func set(_ value: JSONValue) { node.content = .value(value) }

    mutating func encodeNil() throws { set(.null) }
    mutating func encode(_ value: Bool) throws { set(.bool(value)) }
    mutating func encode(_ value: String) throws { set(.string(value)) }
    mutating func encode(_ value: Double) throws {
      set(try EncoderState.number(value, codingPath: codingPath))
    }
    mutating func encode(_ value: Float) throws {
      set(try EncoderState.number(Double(value), codingPath: codingPath))
    }
    mutating func encode(_ value: Int) throws { set(EncoderState.number(value)) }
    mutating func encode(_ value: Int8) throws { set(EncoderState.number(value)) }
    mutating func encode(_ value: Int16) throws { set(EncoderState.number(value)) }
    mutating func encode(_ value: Int32) throws { set(EncoderState.number(value)) }
    mutating func encode(_ value: Int64) throws { set(EncoderState.number(value)) }
    mutating func encode(_ value: UInt) throws { set(EncoderState.number(value)) }
    mutating func encode(_ value: UInt8) throws { set(EncoderState.number(value)) }
    mutating func encode(_ value: UInt16) throws { set(EncoderState.number(value)) }
    mutating func encode(_ value: UInt32) throws { set(EncoderState.number(value)) }
    mutating func encode(_ value: UInt64) throws { set(EncoderState.number(value)) }
    mutating func encode<T: Encodable>(_ value: T) throws {
      try EncoderState.encodeValue(value, into: node, codingPath: codingPath, context: context)
    }
  }
}

/// An array index as a coding key (in coding paths of errors).
struct IndexKey: CodingKey {
  let intValue: Int?
  var stringValue: String { "Index \(intValue ?? 0)" }
  init(_ index: Int) { intValue = index }
  init?(stringValue: String) { return nil }
  init?(intValue: Int) { self.intValue = intValue }
}

/// A key the store adds itself (`_id`, `_rev`, the type field).
struct NamedKey: CodingKey {
  let stringValue: String
  var intValue: Int? { nil }
  init(_ name: String) { stringValue = name }
  init?(stringValue: String) { self.stringValue = stringValue }
  init?(intValue: Int) { return nil }
}
