import Formats
import Synchronization

/// Why JSON text was rejected, and where (byte offset into the input).
///
/// ```swift
/// do { _ = try JSONValue(parsing: "[1,") } catch {
///   print(error)                      // unexpected end of input at byte 3
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

  /// What went wrong and where, for people: `unexpected 'b' at byte 1`,
  /// `unexpected end of input at byte 3` (offsets count from 0).
  public var description: String { "\(reason) at byte \(offset)" }

  /// What went wrong, for people, without the offset: `unexpected 'b'`,
  /// `unexpected end of input`. (``kind`` itself prints as its case: `unexpectedByte(98)`.)
  public var reason: String {
    switch kind {
    case .unexpectedEnd: "unexpected end of input"
    case .unexpectedByte(let byte):
      switch byte {
      case UInt8(ascii: "'"): #"unexpected "'""#
      case 0x21...0x7E: "unexpected '\(Character(Unicode.Scalar(byte)))'"
      case 0x20: "unexpected space"
      case 0x09: "unexpected tab"
      case 0x0A, 0x0D: "unexpected line break"
      default:
        "unexpected byte 0x\(byte < 0x10 ? "0" : "")\(String(byte, radix: 16, uppercase: true))"
      }
    case .invalidUTF8: "invalid UTF-8"
    case .unescapedControlCharacter: "unescaped control character in a string"
    case .invalidEscape: "invalid escape in a string"
    case .loneSurrogate: "unpaired surrogate escape (\\uD800-\\uDFFF) in a string"
    case .invalidNumber: "malformed number"
    case .numberOutOfRange: "number out of range"
    case .tooDeep(let limit): "nested deeper than \(limit) levels"
    case .trailingData: "unexpected data after the JSON value"
    }
  }
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
    #if DEBUG
      // Counted in debug builds only (the tests'): a release build's parse reads no task-local.
      JSONParseCounter.current?.count.add(1, ordering: .relaxed)
    #endif
    let result: Result<JSONValue, JSONParseError>? = bytes.withContiguousStorageIfAvailable {
      unsafe JSONParser.parse($0, maxDepth: maxDepth)
    }
    if let result {
      self = try result.get()
      return
    }
    let copy = Array(bytes)
    self = unsafe try copy.withUnsafeBufferPointer {
      unsafe JSONParser.parse($0, maxDepth: maxDepth)
    }.get()
  }

  /// Parses JSON text from a string.
  ///
  /// - Throws: ``JSONParseError``.
  public init(parsing text: String, maxDepth: Int = JSONValue.defaultMaxDepth)
    throws(JSONParseError)
  {
    #if DEBUG
      JSONParseCounter.current?.count.add(1, ordering: .relaxed)
    #endif
    var t = text
    self = try t.withUTF8 { unsafe JSONParser.parse($0, maxDepth: maxDepth) }.get()
  }
}

/// A strict byte-level JSON parser with an explicit stack.
@unsafe struct JSONParser: ~Copyable {
  /// A container under construction: its kind and where its elements start on `values`.
  struct Frame {
    var isObject: Bool
    var start: Int
  }

  let buf: UnsafeBufferPointer<UInt8>
  let maxDepth: Int
  var i = 0
  var values: ParseStack<JSONValue>
  var keys: ParseStack<String>
  var frames: ParseStack<Frame>
  /// The decoded bytes of a string with escapes.
  var scratch: ByteSink

  init(
    _ buf: UnsafeBufferPointer<UInt8>, maxDepth: Int, values: UnsafeMutableBufferPointer<JSONValue>,
    keys: UnsafeMutableBufferPointer<String>, frames: UnsafeMutableBufferPointer<Frame>,
    scratch: UnsafeMutableBufferPointer<UInt8>
  ) {
    unsafe self.buf = unsafe buf
    unsafe self.maxDepth = max(1, maxDepth)
    unsafe self.values = unsafe ParseStack(values)
    unsafe self.keys = unsafe ParseStack(keys)
    unsafe self.frames = unsafe ParseStack(frames)
    unsafe self.scratch = unsafe ByteSink(scratch)
  }

  /// Parses a whole document; the stacks start on the machine stack.
  static func parse(_ buf: UnsafeBufferPointer<UInt8>, maxDepth: Int) -> Result<
    JSONValue, JSONParseError
  > {
    unsafe withUnsafeTemporaryAllocation(of: JSONValue.self, capacity: 32) { values in
      unsafe withUnsafeTemporaryAllocation(of: String.self, capacity: 32) { keys in
        unsafe withUnsafeTemporaryAllocation(of: Frame.self, capacity: 16) { frames in
          unsafe withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 1024) { scratch in
            var p = unsafe JSONParser(
              buf, maxDepth: maxDepth, values: values, keys: keys, frames: frames, scratch: scratch)
            defer { unsafe p.release() }
            do throws(JSONParseError) { return unsafe .success(try p.parseDocument()) } catch {
              return .failure(error)
            }
          }
        }
      }
    }
  }

  mutating func release() {
    unsafe values.release()
    unsafe keys.release()
    unsafe frames.release()
    unsafe scratch.release()
  }

  @inline(__always)
  mutating func skipWhitespace() {
    while unsafe i < buf.count {
      switch unsafe buf[i] {
      case 0x20, 0x0A, 0x0D, 0x09: unsafe i += 1
      default: return
      }
    }
  }

  @inline(__always)
  func fail(_ kind: JSONParseError.Kind) -> JSONParseError {
    unsafe JSONParseError(kind, at: i)
  }

  @inline(__always)
  func unexpected() -> JSONParseError {
    unsafe i < buf.count ? fail(.unexpectedByte(buf[i])) : fail(.unexpectedEnd)
  }

  mutating func parseDocument() throws(JSONParseError) -> JSONValue {
    while true {
      // Parse one value (or open a container).
      unsafe skipWhitespace()
      guard unsafe i < buf.count else { throw unsafe fail(.unexpectedEnd) }
      var value: JSONValue
      switch unsafe buf[i] {
      case UInt8(ascii: "{"):
        if unsafe frames.count >= maxDepth { throw unsafe fail(.tooDeep(limit: maxDepth)) }
        unsafe i += 1
        unsafe skipWhitespace()
        if unsafe i < buf.count && buf[i] == UInt8(ascii: "}") {
          unsafe i += 1
          value = .object(JSONObject())
        } else {
          unsafe frames.push(Frame(isObject: true, start: values.count))
          unsafe keys.push(try parseKey())
          continue
        }
      case UInt8(ascii: "["):
        if unsafe frames.count >= maxDepth { throw unsafe fail(.tooDeep(limit: maxDepth)) }
        unsafe i += 1
        unsafe skipWhitespace()
        if unsafe i < buf.count && buf[i] == UInt8(ascii: "]") {
          unsafe i += 1
          value = .array([])
        } else {
          unsafe frames.push(Frame(isObject: false, start: values.count))
          continue
        }
      case UInt8(ascii: "\""):
        value = unsafe .string(try parseString())
      case UInt8(ascii: "t"):
        unsafe try literal("true")
        value = .bool(true)
      case UInt8(ascii: "f"):
        unsafe try literal("false")
        value = .bool(false)
      case UInt8(ascii: "n"):
        unsafe try literal("null")
        value = .null
      case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
        value = unsafe .number(try parseNumber())
      default:
        throw unsafe unexpected()
      }

      // Hand the value to its container; close containers as they end.
      while true {
        guard unsafe frames.count > 0 else {
          unsafe skipWhitespace()
          if unsafe i != buf.count { throw unsafe fail(.trailingData) }
          return value
        }
        let inObject = unsafe frames.base[frames.count - 1].isObject
        unsafe values.push(value)
        unsafe skipWhitespace()
        guard unsafe i < buf.count else { throw unsafe fail(.unexpectedEnd) }
        let c = unsafe buf[i]
        if c == UInt8(ascii: ",") {
          unsafe i += 1
          if inObject {
            unsafe skipWhitespace()
            unsafe keys.push(try parseKey())
          }
          break
        }
        if inObject && c == UInt8(ascii: "}") {
          unsafe i += 1
          value = unsafe .object(JSONObject(closeObject(frames.popLast().start)))
          continue
        }
        if !inObject && c == UInt8(ascii: "]") {
          unsafe i += 1
          value = unsafe .array(values.moveArray(from: frames.popLast().start))
          continue
        }
        throw unsafe unexpected()
      }
    }
  }

  /// The members of the object whose values start at `start`, moved off the stacks.
  mutating func closeObject(_ start: Int) -> [JSONObject.Member] {
    let n = unsafe values.count - start
    let v = unsafe values.base + start
    let k = unsafe keys.base + (keys.count - n)
    unsafe values.count = start
    unsafe keys.count -= n
    var members: [JSONObject.Member] = []
    members.reserveCapacity(n)
    for j in 0..<n {
      unsafe members.append(JSONObject.Member(key: (k + j).move(), value: (v + j).move()))
    }
    return members
  }

  /// `"key"` then `:`; leaves `i` after the colon.
  mutating func parseKey() throws(JSONParseError) -> String {
    guard unsafe i < buf.count, unsafe buf[i] == UInt8(ascii: "\"") else {
      throw unsafe unexpected()
    }
    let key = unsafe try parseString()
    unsafe skipWhitespace()
    guard unsafe i < buf.count, unsafe buf[i] == UInt8(ascii: ":") else {
      throw unsafe unexpected()
    }
    unsafe i += 1
    return key
  }

  mutating func literal(_ word: StaticString) throws(JSONParseError) {
    let n = word.utf8CodeUnitCount
    let p = unsafe word.utf8Start
    for k in 0..<n {
      guard unsafe i + k < buf.count else {
        unsafe i += k
        throw unsafe fail(.unexpectedEnd)
      }
      guard unsafe buf[i + k] == p[k] else {
        unsafe i += k
        throw unsafe fail(.unexpectedByte(buf[i]))
      }
    }
    unsafe i += n
  }

  /// Whether byte `c` ends a run of plain string bytes: `"`, `\\` or a control character.
  @inline(__always)
  static func isSpecial(_ c: UInt8) -> Bool {
    c < 0x20 || c == UInt8(ascii: "\"") || c == UInt8(ascii: "\\")
  }

  /// The first index at or after `k` (below `end`) of a `"`, `\\` or control byte, or `end`; ORs
  /// the bytes before it into `high` (bit 7 set means non-ASCII).
  @inline(__always)
  func scanPlain(_ k: Int, _ end: Int, _ high: inout UInt64) -> Int {
    let p = unsafe buf.baseAddress!
    var k = k
    while k < end {
      let stop: Int
      if k + 8 <= end {
        let w = unsafe UnsafeRawPointer(p + k).loadUnaligned(as: UInt64.self)
        if !JSONWriter.needsEscape(w) {
          high |= w
          k += 8
          continue
        }
        stop = k + 8
      } else {
        stop = end
      }
      while k < stop {
        let c = unsafe p[k]
        if unsafe JSONParser.isSpecial(c) { return k }
        high |= UInt64(c)
        k += 1
      }
    }
    return end
  }

  /// Parses a string starting at the opening quote.
  mutating func parseString() throws(JSONParseError) -> String {
    unsafe i += 1
    let start = unsafe i
    let n = unsafe buf.count
    var high: UInt64 = 0
    let k = unsafe scanPlain(start, n, &high)
    guard k < n else {
      unsafe i = n
      throw unsafe fail(.unexpectedEnd)
    }
    let c = unsafe buf[k]
    if c == UInt8(ascii: "\"") {
      // No escapes: the bytes are the string.
      let slice = unsafe UnsafeBufferPointer(rebasing: buf[start..<k])
      unsafe i = k + 1
      if high & 0x8080_8080_8080_8080 == 0 { return unsafe String(decoding: slice, as: UTF8.self) }
      guard let s = unsafe String(validating: slice, as: UTF8.self) else {
        throw unsafe JSONParseError(.invalidUTF8, at: start + firstInvalidUTF8(slice))
      }
      return s
    }
    if c != UInt8(ascii: "\\") {
      unsafe i = k
      throw unsafe fail(.unescapedControlCharacter)
    }
    // Escapes: decode into the scratch sink, then make the string.
    unsafe scratch.removeAll()
    unsafe scratch.append(buf.baseAddress! + start, count: k - start)
    unsafe i = k
    unsafe try decodeEscaped(&high)
    let bytes = unsafe scratch.bytes
    if high & 0x8080_8080_8080_8080 == 0 {
      // ASCII source: escapes produce valid UTF-8.
      return unsafe String(decoding: bytes, as: UTF8.self)
    }
    guard let s = unsafe String(validating: bytes, as: UTF8.self) else {
      throw JSONParseError(.invalidUTF8, at: start)
    }
    return s
  }

  /// Decodes the rest of a string body from the backslash at `i` through the closing quote,
  /// appending UTF-8 to `scratch` and ORing raw bytes into `high`; leaves `i` after the quote.
  mutating func decodeEscaped(_ high: inout UInt64) throws(JSONParseError) {
    while true {
      let k = unsafe scanPlain(i, buf.count, &high)
      if unsafe k > i {
        unsafe scratch.append(buf.baseAddress! + i, count: k - i)
        unsafe i = k
      }
      guard unsafe i < buf.count else { throw unsafe fail(.unexpectedEnd) }
      let c = unsafe buf[i]
      if c == UInt8(ascii: "\"") {
        unsafe i += 1
        return
      }
      if c < 0x20 { throw unsafe fail(.unescapedControlCharacter) }
      // A backslash.
      let escapeAt = unsafe i
      unsafe i += 1
      guard unsafe i < buf.count else { throw unsafe fail(.unexpectedEnd) }
      let byte: UInt8
      switch unsafe buf[i] {
      case UInt8(ascii: "\""): byte = 0x22
      case UInt8(ascii: "\\"): byte = 0x5C
      case UInt8(ascii: "/"): byte = 0x2F
      case UInt8(ascii: "b"): byte = 0x08
      case UInt8(ascii: "f"): byte = 0x0C
      case UInt8(ascii: "n"): byte = 0x0A
      case UInt8(ascii: "r"): byte = 0x0D
      case UInt8(ascii: "t"): byte = 0x09
      case UInt8(ascii: "u"):
        unsafe i += 1
        var scalar = unsafe try hex4()
        if scalar >= 0xD800 && scalar <= 0xDBFF {
          guard unsafe i + 1 < buf.count, unsafe buf[i] == UInt8(ascii: "\\"),
            unsafe buf[i + 1] == UInt8(ascii: "u")
          else {
            throw JSONParseError(.loneSurrogate, at: escapeAt)
          }
          unsafe i += 2
          let low = unsafe try hex4()
          guard low >= 0xDC00 && low <= 0xDFFF else {
            throw JSONParseError(.loneSurrogate, at: escapeAt)
          }
          scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
        } else if scalar >= 0xDC00 && scalar <= 0xDFFF {
          throw JSONParseError(.loneSurrogate, at: escapeAt)
        }
        unsafe appendUTF8(scalar)
        continue
      default:
        throw JSONParseError(.invalidEscape, at: escapeAt)
      }
      unsafe scratch.append(byte)
      unsafe i += 1
    }
  }

  mutating func hex4() throws(JSONParseError) -> UInt32 {
    var v: UInt32 = 0
    for _ in 0..<4 {
      guard unsafe i < buf.count else { throw unsafe fail(.unexpectedEnd) }
      guard let d = unsafe Hex.value(buf[i]) else { throw unsafe fail(.invalidEscape) }
      v = v << 4 | UInt32(d)
      unsafe i += 1
    }
    return v
  }

  /// Appends scalar `s` to `scratch` as UTF-8.
  @inline(__always)
  mutating func appendUTF8(_ s: UInt32) {
    switch s {
    case 0..<0x80:
      unsafe scratch.append(UInt8(s))
    case 0x80..<0x800:
      unsafe scratch.append(
        word: UInt64(0x80 | (s & 0x3F)) << 8 | UInt64(0xC0 | (s >> 6)), count: 2)
    case 0x800..<0x10000:
      let w = UInt64(0x80 | (s & 0x3F)) << 16 | UInt64(0x80 | ((s >> 6) & 0x3F)) << 8
      unsafe scratch.append(word: w | UInt64(0xE0 | (s >> 12)), count: 3)
    default:
      let w = UInt64(0x80 | (s & 0x3F)) << 24 | UInt64(0x80 | ((s >> 6) & 0x3F)) << 16
      unsafe scratch.append(
        word: w | UInt64(0x80 | ((s >> 12) & 0x3F)) << 8 | UInt64(0xF0 | (s >> 18)), count: 4)
    }
  }

  /// Offset of the first byte where UTF-8 decoding fails (for error reporting).
  func firstInvalidUTF8(_ slice: UnsafeBufferPointer<UInt8>) -> Int {
    var it = unsafe slice.makeIterator()
    var decoder = UTF8()
    var offset = 0
    var consumed = 0
    // Re-decode scalar by scalar, tracking the byte length of each.
    while true {
      switch unsafe decoder.decode(&it) {
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
    let start = unsafe i
    guard let end = unsafe JSONParser.scanNumber(buf, i) else {
      // Point at the offending byte.
      var j = unsafe i
      if unsafe j < buf.count && buf[j] == UInt8(ascii: "-") { j += 1 }
      while unsafe j < buf.count && (buf[j] >= UInt8(ascii: "0") && buf[j] <= UInt8(ascii: "9")) {
        j += 1
      }
      throw JSONParseError(.invalidNumber, at: j)
    }
    unsafe i = end
    let slice = unsafe UnsafeBufferPointer(rebasing: buf[start..<end])
    let text = unsafe String(decoding: slice, as: UTF8.self)
    var small = end - start <= 18
    if small {
      small = unsafe !slice.contains { b in
        b == UInt8(ascii: ".") || b == UInt8(ascii: "e") || b == UInt8(ascii: "E")
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
