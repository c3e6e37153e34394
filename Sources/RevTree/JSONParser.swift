/// Why JSON text was rejected, and where (byte offset into the input).
///
/// ```swift
/// do { _ = try JSONValue(parsing: "[1,") } catch {
///   print(error.kind, error.offset)   // unexpectedEnd 3
/// }
/// ```
public struct JSONParseError: Error, Equatable, Sendable, CustomStringConvertible {
  /// What went wrong.
  public enum Kind: Equatable, Sendable {
    /// The input ended inside a value.
    case unexpectedEnd
    /// A byte that cannot start or continue a value here.
    case unexpectedByte(UInt8)
    /// A string is not valid UTF-8.
    case invalidUTF8
    /// A control character (below 0x20) inside a string: it must be escaped.
    case unescapedControlCharacter
    /// An unknown `\` escape or a malformed `\u` escape.
    case invalidEscape
    /// A `\u` escape names half of a surrogate pair without the other half.
    case loneSurrogate
    /// A malformed number literal.
    case invalidNumber
    /// A number whose magnitude overflows a `Double`.
    case numberOutOfRange
    /// Nesting deeper than the limit.
    case tooDeep(limit: Int)
    /// Something other than whitespace after the value.
    case trailingData
  }

  /// What went wrong.
  public let kind: Kind
  /// Byte offset in the input where the problem was found.
  public let offset: Int

  /// Creates an error.
  public init(_ kind: Kind, at offset: Int) {
    self.kind = kind
    self.offset = offset
  }

  public var description: String { "invalid JSON at byte \(offset): \(kind)" }
}

extension JSONValue {
  /// The default nesting limit of the parser.
  public static let defaultMaxDepth = 512

  /// Parses UTF-8 JSON text strictly (RFC 8259).
  ///
  /// Iterative, so hostile nesting cannot overflow the stack; every error carries the byte
  /// offset where it was found.
  ///
  /// ```swift
  /// let v = try JSONValue(parsing: Array(#"{"a":1}"#.utf8))
  /// ```
  /// - Parameters:
  ///   - bytes: the text, UTF-8 without byte-order mark.
  ///   - maxDepth: the deepest nesting of arrays and objects allowed.
  /// - Throws: ``JSONParseError``.
  public init(parsing bytes: some Collection<UInt8>, maxDepth: Int = JSONValue.defaultMaxDepth)
    throws(JSONParseError)
  {
    let result: Result<JSONValue, JSONParseError>? = bytes.withContiguousStorageIfAvailable { buf in
      var p = JSONParser(buf, maxDepth: maxDepth)
      do throws(JSONParseError) { return .success(try p.parseDocument()) } catch {
        return .failure(error)
      }
    }
    if let result {
      self = try result.get()
      return
    }
    let copy = Array(bytes)
    let r: Result<JSONValue, JSONParseError> = copy.withUnsafeBufferPointer { buf in
      var p = JSONParser(buf, maxDepth: maxDepth)
      do throws(JSONParseError) { return .success(try p.parseDocument()) } catch {
        return .failure(error)
      }
    }
    self = try r.get()
  }

  /// Parses JSON text from a string.
  ///
  /// - Throws: ``JSONParseError``.
  public init(parsing text: String, maxDepth: Int = JSONValue.defaultMaxDepth)
    throws(JSONParseError)
  {
    var t = text
    let r: Result<JSONValue, JSONParseError> = t.withUTF8 { buf in
      var p = JSONParser(buf, maxDepth: maxDepth)
      do throws(JSONParseError) { return .success(try p.parseDocument()) } catch {
        return .failure(error)
      }
    }
    self = try r.get()
  }
}

/// A strict byte-level JSON parser with an explicit stack.
struct JSONParser {
  let buf: UnsafeBufferPointer<UInt8>
  let maxDepth: Int
  var i = 0
  var scratch: [UInt8] = []

  init(_ buf: UnsafeBufferPointer<UInt8>, maxDepth: Int) {
    self.buf = buf
    self.maxDepth = max(1, maxDepth)
  }

  @inline(__always)
  mutating func skipWhitespace() {
    while i < buf.count {
      switch buf[i] {
      case 0x20, 0x0A, 0x0D, 0x09: i += 1
      default: return
      }
    }
  }

  @inline(__always)
  func fail(_ kind: JSONParseError.Kind) -> JSONParseError {
    JSONParseError(kind, at: i)
  }

  @inline(__always)
  func unexpected() -> JSONParseError {
    i < buf.count ? fail(.unexpectedByte(buf[i])) : fail(.unexpectedEnd)
  }

  mutating func parseDocument() throws(JSONParseError) -> JSONValue {
    // Containers under construction, innermost last.
    var isObject: [Bool] = []
    var arrays: [[JSONValue]] = []
    var objects: [[JSONObject.Member]] = []
    var keys: [String] = []

    while true {
      // Parse one value (or open a container).
      skipWhitespace()
      guard i < buf.count else { throw fail(.unexpectedEnd) }
      var value: JSONValue
      switch buf[i] {
      case UInt8(ascii: "{"):
        if isObject.count >= maxDepth { throw fail(.tooDeep(limit: maxDepth)) }
        i += 1
        skipWhitespace()
        if i < buf.count && buf[i] == UInt8(ascii: "}") {
          i += 1
          value = .object(JSONObject())
        } else {
          isObject.append(true)
          objects.append([])
          keys.append(try parseKey())
          continue
        }
      case UInt8(ascii: "["):
        if isObject.count >= maxDepth { throw fail(.tooDeep(limit: maxDepth)) }
        i += 1
        skipWhitespace()
        if i < buf.count && buf[i] == UInt8(ascii: "]") {
          i += 1
          value = .array([])
        } else {
          isObject.append(false)
          arrays.append([])
          continue
        }
      case UInt8(ascii: "\""):
        value = .string(try parseString())
      case UInt8(ascii: "t"):
        try literal("true")
        value = .bool(true)
      case UInt8(ascii: "f"):
        try literal("false")
        value = .bool(false)
      case UInt8(ascii: "n"):
        try literal("null")
        value = .null
      case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
        value = .number(try parseNumber())
      default:
        throw unexpected()
      }

      // Hand the value to its container; close containers as they end.
      while true {
        guard let inObject = isObject.last else {
          skipWhitespace()
          if i != buf.count { throw fail(.trailingData) }
          return value
        }
        if inObject {
          objects[objects.count - 1].append(JSONObject.Member(key: keys.removeLast(), value: value))
        } else {
          arrays[arrays.count - 1].append(value)
        }
        skipWhitespace()
        guard i < buf.count else { throw fail(.unexpectedEnd) }
        let c = buf[i]
        if c == UInt8(ascii: ",") {
          i += 1
          if inObject {
            skipWhitespace()
            keys.append(try parseKey())
          }
          break
        }
        if inObject && c == UInt8(ascii: "}") {
          i += 1
          isObject.removeLast()
          value = .object(JSONObject(objects.removeLast()))
          continue
        }
        if !inObject && c == UInt8(ascii: "]") {
          i += 1
          isObject.removeLast()
          value = .array(arrays.removeLast())
          continue
        }
        throw unexpected()
      }
    }
  }

  /// `"key"` then `:`; leaves `i` after the colon.
  mutating func parseKey() throws(JSONParseError) -> String {
    guard i < buf.count, buf[i] == UInt8(ascii: "\"") else { throw unexpected() }
    let key = try parseString()
    skipWhitespace()
    guard i < buf.count, buf[i] == UInt8(ascii: ":") else { throw unexpected() }
    i += 1
    return key
  }

  mutating func literal(_ word: StaticString) throws(JSONParseError) {
    let n = word.utf8CodeUnitCount
    let p = word.utf8Start
    for k in 0..<n {
      guard i + k < buf.count else {
        i += k
        throw fail(.unexpectedEnd)
      }
      guard buf[i + k] == p[k] else {
        i += k
        throw fail(.unexpectedByte(buf[i]))
      }
    }
    i += n
  }

  /// Parses a string starting at the opening quote.
  mutating func parseString() throws(JSONParseError) -> String {
    i += 1
    let start = i
    var ascii = true
    // Fast path: no escapes.
    while i < buf.count {
      let c = buf[i]
      if c == UInt8(ascii: "\"") {
        let slice = UnsafeBufferPointer(rebasing: buf[start..<i])
        i += 1
        if ascii { return String(decoding: slice, as: UTF8.self) }
        guard let s = String(validating: slice, as: UTF8.self) else {
          throw JSONParseError(.invalidUTF8, at: start + firstInvalidUTF8(slice))
        }
        return s
      }
      if c == UInt8(ascii: "\\") { break }
      if c < 0x20 { throw fail(.unescapedControlCharacter) }
      if c >= 0x80 { ascii = false }
      i += 1
    }
    guard i < buf.count else { throw fail(.unexpectedEnd) }
    // Slow path: escapes.
    scratch.removeAll(keepingCapacity: true)
    scratch.append(contentsOf: UnsafeBufferPointer(rebasing: buf[start..<i]))
    while true {
      guard i < buf.count else { throw fail(.unexpectedEnd) }
      let c = buf[i]
      if c == UInt8(ascii: "\"") {
        i += 1
        break
      }
      if c < 0x20 { throw fail(.unescapedControlCharacter) }
      if c != UInt8(ascii: "\\") {
        scratch.append(c)
        i += 1
        continue
      }
      let escapeAt = i
      i += 1
      guard i < buf.count else { throw fail(.unexpectedEnd) }
      switch buf[i] {
      case UInt8(ascii: "\""): scratch.append(0x22)
      case UInt8(ascii: "\\"): scratch.append(0x5C)
      case UInt8(ascii: "/"): scratch.append(0x2F)
      case UInt8(ascii: "b"): scratch.append(0x08)
      case UInt8(ascii: "f"): scratch.append(0x0C)
      case UInt8(ascii: "n"): scratch.append(0x0A)
      case UInt8(ascii: "r"): scratch.append(0x0D)
      case UInt8(ascii: "t"): scratch.append(0x09)
      case UInt8(ascii: "u"):
        i += 1
        var scalar = try hex4()
        if scalar >= 0xD800 && scalar <= 0xDBFF {
          guard i + 1 < buf.count, buf[i] == UInt8(ascii: "\\"), buf[i + 1] == UInt8(ascii: "u")
          else {
            throw JSONParseError(.loneSurrogate, at: escapeAt)
          }
          i += 2
          let low = try hex4()
          guard low >= 0xDC00 && low <= 0xDFFF else {
            throw JSONParseError(.loneSurrogate, at: escapeAt)
          }
          scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
        } else if scalar >= 0xDC00 && scalar <= 0xDFFF {
          throw JSONParseError(.loneSurrogate, at: escapeAt)
        }
        appendUTF8(scalar)
        continue
      default:
        throw JSONParseError(.invalidEscape, at: escapeAt)
      }
      i += 1
    }
    guard let s = String(validating: scratch, as: UTF8.self) else {
      throw JSONParseError(.invalidUTF8, at: start)
    }
    return s
  }

  mutating func hex4() throws(JSONParseError) -> UInt32 {
    var v: UInt32 = 0
    for _ in 0..<4 {
      guard i < buf.count else { throw fail(.unexpectedEnd) }
      guard let d = RevHash.hexValue(buf[i]) else { throw fail(.invalidEscape) }
      v = v << 4 | UInt32(d)
      i += 1
    }
    return v
  }

  mutating func appendUTF8(_ s: UInt32) {
    switch s {
    case 0..<0x80:
      scratch.append(UInt8(s))
    case 0x80..<0x800:
      scratch.append(UInt8(0xC0 | (s >> 6)))
      scratch.append(UInt8(0x80 | (s & 0x3F)))
    case 0x800..<0x10000:
      scratch.append(UInt8(0xE0 | (s >> 12)))
      scratch.append(UInt8(0x80 | ((s >> 6) & 0x3F)))
      scratch.append(UInt8(0x80 | (s & 0x3F)))
    default:
      scratch.append(UInt8(0xF0 | (s >> 18)))
      scratch.append(UInt8(0x80 | ((s >> 12) & 0x3F)))
      scratch.append(UInt8(0x80 | ((s >> 6) & 0x3F)))
      scratch.append(UInt8(0x80 | (s & 0x3F)))
    }
  }

  /// Offset of the first byte where UTF-8 decoding fails (for error reporting).
  func firstInvalidUTF8(_ slice: UnsafeBufferPointer<UInt8>) -> Int {
    var it = slice.makeIterator()
    var decoder = UTF8()
    var offset = 0
    var consumed = 0
    // Re-decode scalar by scalar, tracking the byte length of each.
    while true {
      switch decoder.decode(&it) {
      case .scalarValue(let s):
        consumed += UTF8.width(s)
        offset = consumed
      case .emptyInput:
        return offset
      case .error:
        return offset
      }
    }
  }

  /// Parses a number literal, validating grammar and range.
  mutating func parseNumber() throws(JSONParseError) -> JSONNumber {
    let start = i
    guard let end = JSONParser.scanNumber(buf, i) else {
      // Point at the offending byte.
      var j = i
      if j < buf.count && buf[j] == UInt8(ascii: "-") { j += 1 }
      while j < buf.count && (buf[j] >= UInt8(ascii: "0") && buf[j] <= UInt8(ascii: "9")) { j += 1 }
      throw JSONParseError(.invalidNumber, at: j)
    }
    i = end
    let slice = UnsafeBufferPointer(rebasing: buf[start..<end])
    let text = String(decoding: slice, as: UTF8.self)
    var small = end - start <= 18
    if small {
      for b in slice
      where b == UInt8(ascii: ".") || b == UInt8(ascii: "e") || b == UInt8(ascii: "E") {
        small = false
        break
      }
    }
    if !small {
      guard let d = Double(text), d.isFinite else {
        throw JSONParseError(.numberOutOfRange, at: start)
      }
    }
    return JSONNumber(validatedText: text)
  }

  /// The end of a JSON number literal starting at `start`, or `nil` if malformed.
  static func scanNumber(_ b: some RandomAccessCollection<UInt8>, _ start: Int) -> Int? {
    let n = b.count
    let base = b.startIndex
    @inline(__always) func at(_ k: Int) -> UInt8 { b[b.index(base, offsetBy: k)] }
    @inline(__always) func isDigit(_ k: Int) -> Bool { k < n && at(k) >= 0x30 && at(k) <= 0x39 }
    var j = start
    if j < n && at(j) == UInt8(ascii: "-") { j += 1 }
    guard isDigit(j) else { return nil }
    if at(j) == UInt8(ascii: "0") {
      j += 1
    } else {
      while isDigit(j) { j += 1 }
    }
    if j < n && at(j) == UInt8(ascii: ".") {
      j += 1
      guard isDigit(j) else { return nil }
      while isDigit(j) { j += 1 }
    }
    if j < n && (at(j) == UInt8(ascii: "e") || at(j) == UInt8(ascii: "E")) {
      j += 1
      if j < n && (at(j) == UInt8(ascii: "+") || at(j) == UInt8(ascii: "-")) { j += 1 }
      guard isDigit(j) else { return nil }
      while isDigit(j) { j += 1 }
    }
    return j
  }
}
