/// A JSON value that keeps what a document author wrote: object keys in their original order
/// and numbers as their original text.
///
/// Parse with ``init(parsing:maxDepth:)`` (strict, byte-level, never crashes on hostile input),
/// write back with ``serialized()`` (original key order) or ``canonicalSerialized()`` (the form
/// revision digests are computed over; see ``RevisionDigest``).
///
/// ```swift
/// let doc = try JSONValue(parsing: #"{"b": 1.50, "a": [true, null]}"#)
/// doc["b"]?.numberValue?.text                  // "1.50"
/// String(decoding: doc.serialized(), as: UTF8.self)           // {"b":1.50,"a":[true,null]}
/// String(decoding: doc.canonicalSerialized(), as: UTF8.self)  // {"a":[true,null],"b":1.5}
/// ```
///
/// ## Decisions
/// - **Numbers** keep their literal text (`1.0` stays `1.0`, `100000000000000000001` stays
///   exact) so that a stored document comes back as written; ``JSONNumber`` offers `Int64` and
///   `Double` views. Equality of two numbers is equality of their text. A literal whose
///   magnitude overflows a `Double` (`1e400`) is rejected.
/// - **Duplicate keys** are kept in order by the parser and by ``serialized()``; lookups and the
///   canonical form use the last occurrence, as JavaScript's `JSON.parse` does.
/// - **Strings** must be valid UTF-8; `\u` escapes must form valid scalars, so a lone surrogate
///   (`"\ud800"`) is an error: Swift strings cannot hold one and CouchDB's JSON library rejects
///   it too.
/// - **Depth** is limited (512 by default) so hostile input such as 100,000 `[` is an error, not a
///   stack overflow.
public enum JSONValue: Sendable, Hashable {
  case null
  case bool(Bool)
  case number(JSONNumber)
  case string(String)
  case array([JSONValue])
  case object(JSONObject)

  /// The member `key` of an object (the last one if the key is duplicated), `nil` otherwise.
  public subscript(key: String) -> JSONValue? {
    if case .object(let o) = self { return o[key] }
    return nil
  }

  /// The element at `index` of an array, `nil` otherwise.
  public subscript(index: Int) -> JSONValue? {
    if case .array(let a) = self, a.indices.contains(index) { return a[index] }
    return nil
  }

  /// The string payload, if this is a string.
  public var stringValue: String? {
    if case .string(let s) = self { return s }
    return nil
  }

  /// The number payload, if this is a number.
  public var numberValue: JSONNumber? {
    if case .number(let n) = self { return n }
    return nil
  }

  /// The boolean payload, if this is a boolean.
  public var boolValue: Bool? {
    if case .bool(let b) = self { return b }
    return nil
  }

  /// The object payload, if this is an object.
  public var objectValue: JSONObject? {
    if case .object(let o) = self { return o }
    return nil
  }

  /// The array payload, if this is an array.
  public var arrayValue: [JSONValue]? {
    if case .array(let a) = self { return a }
    return nil
  }
}

/// A JSON number, kept as its literal text.
///
/// ```swift
/// let n = JSONNumber(text: "-12.50")!
/// n.doubleValue       // -12.5
/// n.int64Value        // nil (not an integer literal)
/// n.canonicalText     // "-12.5"
/// JSONNumber(42).text // "42"
/// ```
public struct JSONNumber: Sendable, Hashable, CustomStringConvertible, ExpressibleByIntegerLiteral {
  /// The literal as written, a valid JSON number.
  public let text: String

  /// Validates `text` as a JSON number literal whose value is a finite `Double`.
  public init?(text: String) {
    let bytes = Array(text.utf8)
    guard let end = unsafe JSONParser.scanNumber(bytes, 0), end == bytes.count,
      JSONNumber.isFinite(text, bytes)
    else { return nil }
    self.text = text
  }

  init(validatedText: String) {
    text = validatedText
  }

  /// An integer.
  public init(_ value: Int64) {
    text = String(value)
  }

  /// An integer literal.
  public init(integerLiteral value: Int64) {
    self.init(value)
  }

  /// A finite double, written in canonical form; `nil` for NaN or infinity.
  public init?(_ value: Double) {
    guard value.isFinite else { return nil }
    text = JSONNumber.canonical(value)
  }

  static func isFinite(_ text: String, _ bytes: [UInt8]) -> Bool {
    if JSONNumber.isSmallInteger(bytes[...]) { return true }
    return Double(text)?.isFinite ?? false
  }

  /// Integer literal of at most 18 digits: fits Int64 without checking.
  static func isSmallInteger(_ bytes: ArraySlice<UInt8>) -> Bool {
    var digits = 0
    for b in bytes {
      if b == UInt8(ascii: "-") { continue }
      if b < UInt8(ascii: "0") || b > UInt8(ascii: "9") { return false }
      digits += 1
    }
    return digits <= 18
  }

  /// Whether the literal has no fraction and no exponent.
  public var isIntegerLiteral: Bool {
    !text.utf8.contains {
      $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "e") || $0 == UInt8(ascii: "E")
    }
  }

  /// The value as `Int64` when the literal is an integer that fits.
  public var int64Value: Int64? {
    isIntegerLiteral ? Int64(text) : nil
  }

  /// The value as the nearest `Double`.
  public var doubleValue: Double {
    Double(text) ?? 0
  }

  /// The canonical text (see ``RevisionDigest``): an integer that fits `Int64` as a decimal
  /// integer, any other value as Swift's shortest round-trip `Double` description, `-0` as `0`.
  public var canonicalText: String {
    if isIntegerLiteral, let v = Int64(text) { return String(v) }
    return JSONNumber.canonical(doubleValue)
  }

  static func canonical(_ d: Double) -> String {
    if d == 0 { return "0" }
    if d == d.rounded(.towardZero), abs(d) < 9.223_372_036_854_775_808e18 {
      return String(Int64(d))
    }
    return d.description
  }

  public var description: String { text }
}

/// A JSON object: members in their original order.
///
/// ```swift
/// var o = JSONObject()
/// o["title"] = .string("Home")
/// o.keys   // ["title"]
/// ```
public struct JSONObject: Sendable, Hashable, RandomAccessCollection {
  /// One `"key": value` pair.
  public struct Member: Sendable, Hashable {
    public var key: String
    public var value: JSONValue

    /// Creates a member.
    public init(key: String, value: JSONValue) {
      self.key = key
      self.value = value
    }
  }

  /// The members in order, duplicates included.
  public var members: [Member]

  /// An empty object.
  public init() {
    members = []
  }

  /// An object with `members` in this order.
  public init(_ members: [Member]) {
    self.members = members
  }

  /// An object from `(key, value)` pairs in this order.
  public init(_ pairs: KeyValuePairs<String, JSONValue>) {
    members = pairs.map { Member(key: $0.key, value: $0.value) }
  }

  public var startIndex: Int { members.startIndex }
  public var endIndex: Int { members.endIndex }
  public subscript(position: Int) -> Member { members[position] }

  /// The keys in order.
  public var keys: [String] { members.map(\.key) }

  /// The value of `key` (the last occurrence). Setting replaces the last occurrence or appends;
  /// setting `nil` removes every occurrence.
  public subscript(key: String) -> JSONValue? {
    get {
      for m in members.reversed() where m.key == key { return m.value }
      return nil
    }
    set {
      guard let newValue else {
        members.removeAll { $0.key == key }
        return
      }
      if let i = members.lastIndex(where: { $0.key == key }) {
        members[i].value = newValue
      } else {
        members.append(Member(key: key, value: newValue))
      }
    }
  }
}

extension JSONValue {
  /// A JSON integer (a value beyond 64-bit signed range is clamped).
  ///
  /// ```swift
  /// JSONValue.int(42).serialized()  // "42"
  /// ```
  public static func int(_ value: some BinaryInteger) -> JSONValue {
    .number(JSONNumber(Int64(clamping: value)))
  }
}
