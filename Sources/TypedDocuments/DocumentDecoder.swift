import Formats
import Foundation
public import JSON

/// Decodes a `Decodable` value straight from a `JSONValue`, in the forms
/// ``DocumentEncoder`` writes (`Date` from an ISO-8601 string, `Data` from Base64, `URL` from a
/// string); an integer type accepts a number only when it is an integer in range. It also notes
/// which object members the type asked for , so that a save can keep the members it
/// did not know (a field another client added survives a round trip).
///
/// ```swift
/// let tags = try DocumentDecoder().decode([String].self, from: .array([.string("a")]))
/// ```
public struct DocumentDecoder: Sendable {
  public init() {}

  /// `value` as a `T`.
  public func decode<T: Decodable>(_ type: T.Type, from value: JSONValue) throws -> T {
    try decode(type, from: value, use: KeyUse())
  }

  func decode<T: Decodable>(_ type: T.Type, from value: JSONValue, use: KeyUse) throws -> T {
    try DecoderState.decodeValue(type, from: value, use: use, codingPath: [])
  }
}

/// The members of an object that a decoded type asked for, and below them what it asked of
/// each member; ``ownsEveryKey`` when it read the object as a dictionary (every key its own).
final class KeyUse {
  var members: [String: KeyUse] = [:]
  var ownsEveryKey = false

  func member(_ key: String) -> KeyUse {
    if let use = members[key] { return use }
    let use = KeyUse()
    members[key] = use
    return use
  }

  /// `new` with the members of `old` that this use did not know, at every level where both
  /// are objects and the type read them as structures (not as dictionaries).
  func keepingUnknown(of old: JSONObject, in new: JSONObject) -> JSONObject {
    if ownsEveryKey { return new }
    var merged = new
    for member in old.members {
      if let use = members[member.key] {
        if case .object(let oldChild) = member.value, case .object(let newChild)? = new[member.key],
          !use.members.isEmpty || use.ownsEveryKey
        {
          merged[member.key] = .object(use.keepingUnknown(of: oldChild, in: newChild))
        }
      } else if new[member.key] == nil {
        merged.members.append(member)
      }
    }
    return merged
  }
}

struct DecoderState: Decoder {
  let value: JSONValue
  let use: KeyUse
  let codingPath: [any CodingKey]
  var userInfo: [CodingUserInfoKey: Any] { [:] }

  func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
    guard case .object(let object) = value else {
      throw DecodingError.typeMismatch(
        [String: Any].self,
        .init(
          codingPath: codingPath, debugDescription: "expected an object, found \(Self.kind(value))")
      )
    }
    return KeyedDecodingContainer(Keyed<Key>(object: object, use: use, codingPath: codingPath))
  }

  func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
    guard case .array(let elements) = value else {
      throw DecodingError.typeMismatch(
        [Any].self,
        .init(
          codingPath: codingPath, debugDescription: "expected an array, found \(Self.kind(value))"))
    }
    return Unkeyed(elements: elements, codingPath: codingPath)
  }

  func singleValueContainer() throws -> any SingleValueDecodingContainer {
    Single(value: value, use: use, codingPath: codingPath)
  }

  static func kind(_ value: JSONValue) -> String {
    switch value {
    case .null: "null"
    case .bool: "a boolean"
    case .number: "a number"
    case .string: "a string"
    case .array: "an array"
    case .object: "an object"
    }
  }

  static func decodeValue<T: Decodable>(
    _ type: T.Type, from value: JSONValue, use: KeyUse, codingPath: [any CodingKey]
  ) throws -> T {
    func mismatch(_ expected: String) -> DecodingError {
      .typeMismatch(
        type,
        .init(
          codingPath: codingPath, debugDescription: "expected \(expected), found \(kind(value))"))
    }
    if type == Date.self {
      guard case .string(let text) = value else { throw mismatch("an ISO-8601 time") }
      guard let date = ISO8601.parse(text) else {
        throw DecodingError.dataCorrupted(
          .init(codingPath: codingPath, debugDescription: "\"\(text)\" is not an ISO-8601 time"))
      }
      return date as! T
    }
    if type == Data.self {
      guard case .string(let text) = value else { throw mismatch("Base64 text") }
      guard let bytes = Base64.decode(text) else {
        throw DecodingError.dataCorrupted(
          .init(codingPath: codingPath, debugDescription: "not Base64"))
      }
      return Data(bytes) as! T
    }
    if type == URL.self {
      guard case .string(let text) = value else { throw mismatch("a URL") }
      guard let url = URL(string: text) else {
        throw DecodingError.dataCorrupted(
          .init(codingPath: codingPath, debugDescription: "\"\(text)\" is not a URL"))
      }
      return url as! T
    }
    if type == Decimal.self {
      guard case .number(let number) = value else { throw mismatch("a number") }
      guard let decimal = Decimal(string: number.text) else { throw mismatch("a decimal number") }
      return decimal as! T
    }
    return try T(from: DecoderState(value: value, use: use, codingPath: codingPath))
  }

  static func integer<T: FixedWidthInteger>(
    _ type: T.Type, _ value: JSONValue, _ codingPath: [any CodingKey]
  )
    throws -> T
  {
    guard case .number(let number) = value else {
      throw DecodingError.typeMismatch(
        type,
        .init(codingPath: codingPath, debugDescription: "expected a number, found \(kind(value))"))
    }
    if number.isIntegerLiteral, let exact = T(number.text) { return exact }
    let double = number.doubleValue
    if double.rounded() == double, let exact = T(exactly: double) { return exact }
    throw DecodingError.dataCorrupted(
      .init(codingPath: codingPath, debugDescription: "\(number.text) does not fit \(type)"))
  }

  static func double(_ value: JSONValue, _ codingPath: [any CodingKey]) throws -> Double {
    guard case .number(let number) = value else {
      throw DecodingError.typeMismatch(
        Double.self,
        .init(codingPath: codingPath, debugDescription: "expected a number, found \(kind(value))"))
    }
    return number.doubleValue
  }

  static func bool(_ value: JSONValue, _ codingPath: [any CodingKey]) throws -> Bool {
    guard case .bool(let b) = value else {
      throw DecodingError.typeMismatch(
        Bool.self,
        .init(codingPath: codingPath, debugDescription: "expected a boolean, found \(kind(value))"))
    }
    return b
  }

  static func string(_ value: JSONValue, _ codingPath: [any CodingKey]) throws -> String {
    guard case .string(let s) = value else {
      throw DecodingError.typeMismatch(
        String.self,
        .init(codingPath: codingPath, debugDescription: "expected a string, found \(kind(value))"))
    }
    return s
  }

  struct Keyed<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let object: JSONObject
    let use: KeyUse
    let codingPath: [any CodingKey]

    var allKeys: [Key] {
      use.ownsEveryKey = true
      return object.keys.compactMap { Key(stringValue: $0) }
    }

    func contains(_ key: Key) -> Bool {
      _ = use.member(key.stringValue)
      return object[key.stringValue] != nil
    }

    func value(_ key: Key) throws -> JSONValue {
      _ = use.member(key.stringValue)
      guard let value = object[key.stringValue] else {
        throw DecodingError.keyNotFound(
          key, .init(codingPath: codingPath, debugDescription: "no member \"\(key.stringValue)\""))
      }
      return value
    }

    func decodeNil(forKey key: Key) throws -> Bool { try value(key) == .null }
    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool {
      try DecoderState.bool(try value(key), codingPath + [key])
    }
    func decode(_ type: String.Type, forKey key: Key) throws -> String {
      try DecoderState.string(try value(key), codingPath + [key])
    }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double {
      try DecoderState.double(try value(key), codingPath + [key])
    }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float {
      Float(try DecoderState.double(try value(key), codingPath + [key]))
    }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try int(type, key) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try int(type, key) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try int(type, key) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try int(type, key) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try int(type, key) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try int(type, key) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try int(type, key) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try int(type, key) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try int(type, key) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try int(type, key) }
    func int<T: FixedWidthInteger>(_ type: T.Type, _ key: Key) throws -> T {
      try DecoderState.integer(type, try value(key), codingPath + [key])
    }
    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
      try DecoderState.decodeValue(
        type, from: try value(key), use: use.member(key.stringValue), codingPath: codingPath + [key]
      )
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws
      -> KeyedDecodingContainer<NestedKey>
    {
      try DecoderState(
        value: try value(key), use: use.member(key.stringValue), codingPath: codingPath + [key]
      )
      .container(keyedBy: type)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
      try DecoderState(
        value: try value(key), use: use.member(key.stringValue), codingPath: codingPath + [key]
      )
      .unkeyedContainer()
    }

    func superDecoder() throws -> any Decoder {
      DecoderState(
        value: object["super"] ?? .null, use: use.member("super"), codingPath: codingPath)
    }

    func superDecoder(forKey key: Key) throws -> any Decoder {
      DecoderState(
        value: object[key.stringValue] ?? .null, use: use.member(key.stringValue),
        codingPath: codingPath + [key])
    }
  }

  /// Array elements: what a type reads of them is not noted (an array is saved whole).
  struct Unkeyed: UnkeyedDecodingContainer {
    let elements: [JSONValue]
    let codingPath: [any CodingKey]
    var currentIndex = 0
    var count: Int? { elements.count }
    var isAtEnd: Bool { currentIndex >= elements.count }

    mutating func next() throws -> (JSONValue, [any CodingKey]) {
      guard !isAtEnd else {
        throw DecodingError.valueNotFound(
          Any.self,
          .init(
            codingPath: codingPath + [IndexKey(currentIndex)],
            debugDescription: "the array has no more elements"))
      }
      defer { currentIndex += 1 }
      return (elements[currentIndex], codingPath + [IndexKey(currentIndex)])
    }

    mutating func decodeNil() throws -> Bool {
      guard !isAtEnd else { return false }
      if elements[currentIndex] == .null {
        currentIndex += 1
        return true
      }
      return false
    }
    mutating func decode(_ type: Bool.Type) throws -> Bool {
      let (v, path) = try next()
      return try DecoderState.bool(v, path)
    }
    mutating func decode(_ type: String.Type) throws -> String {
      let (v, path) = try next()
      return try DecoderState.string(v, path)
    }
    mutating func decode(_ type: Double.Type) throws -> Double {
      let (v, path) = try next()
      return try DecoderState.double(v, path)
    }
    mutating func decode(_ type: Float.Type) throws -> Float {
      let (v, path) = try next()
      return Float(try DecoderState.double(v, path))
    }
    mutating func decode(_ type: Int.Type) throws -> Int { try int(type) }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { try int(type) }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { try int(type) }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { try int(type) }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { try int(type) }
    mutating func decode(_ type: UInt.Type) throws -> UInt { try int(type) }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try int(type) }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try int(type) }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try int(type) }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try int(type) }
    mutating func int<T: FixedWidthInteger>(_ type: T.Type) throws -> T {
      let (v, path) = try next()
      return try DecoderState.integer(type, v, path)
    }
    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
      let (v, path) = try next()
      return try DecoderState.decodeValue(type, from: v, use: KeyUse(), codingPath: path)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws
      -> KeyedDecodingContainer<NestedKey>
    {
      let (v, path) = try next()
      return try DecoderState(value: v, use: KeyUse(), codingPath: path).container(keyedBy: type)
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
      let (v, path) = try next()
      return try DecoderState(value: v, use: KeyUse(), codingPath: path).unkeyedContainer()
    }

    mutating func superDecoder() throws -> any Decoder {
      let (v, path) = try next()
      return DecoderState(value: v, use: KeyUse(), codingPath: path)
    }
  }

  struct Single: SingleValueDecodingContainer {
    let value: JSONValue
    let use: KeyUse
    let codingPath: [any CodingKey]

    func decodeNil() -> Bool { value == .null }
    func decode(_ type: Bool.Type) throws -> Bool { try DecoderState.bool(value, codingPath) }
    func decode(_ type: String.Type) throws -> String { try DecoderState.string(value, codingPath) }
    func decode(_ type: Double.Type) throws -> Double { try DecoderState.double(value, codingPath) }
    func decode(_ type: Float.Type) throws -> Float {
      Float(try DecoderState.double(value, codingPath))
    }
    func decode(_ type: Int.Type) throws -> Int {
      try DecoderState.integer(type, value, codingPath)
    }
    func decode(_ type: Int8.Type) throws -> Int8 {
      try DecoderState.integer(type, value, codingPath)
    }
    func decode(_ type: Int16.Type) throws -> Int16 {
      try DecoderState.integer(type, value, codingPath)
    }
    func decode(_ type: Int32.Type) throws -> Int32 {
      try DecoderState.integer(type, value, codingPath)
    }
    func decode(_ type: Int64.Type) throws -> Int64 {
      try DecoderState.integer(type, value, codingPath)
    }
    func decode(_ type: UInt.Type) throws -> UInt {
      try DecoderState.integer(type, value, codingPath)
    }
    func decode(_ type: UInt8.Type) throws -> UInt8 {
      try DecoderState.integer(type, value, codingPath)
    }
    func decode(_ type: UInt16.Type) throws -> UInt16 {
      try DecoderState.integer(type, value, codingPath)
    }
    func decode(_ type: UInt32.Type) throws -> UInt32 {
      try DecoderState.integer(type, value, codingPath)
    }
    func decode(_ type: UInt64.Type) throws -> UInt64 {
      try DecoderState.integer(type, value, codingPath)
    }
    func decode<T: Decodable>(_ type: T.Type) throws -> T {
      try DecoderState.decodeValue(type, from: value, use: use, codingPath: codingPath)
    }
  }
}
