import CPCRE2

/// A regular expression in PCRE's syntax, compiled by PCRE2 in UTF mode: Mango's `$regex` and
/// `wikilog grep`.
///
/// CouchDB's `$regex` is Erlang's `re`, which is PCRE, so patterns mean here what they mean
/// there (classes, anchors, lookarounds, `(?i)`), with one difference: `.` and classes match
/// code points (UTF mode), where CouchDB's compile without `unicode` matches bytes.
///
/// Matching is bounded as Erlang's `re` bounds it, more tightly: at most ``matchLimit`` steps
/// of backtracking per subject (`re`'s `match_limit` is 10,000,000 by default) and at most
/// ``heapLimitKiB`` of memory for them. A subject that a pattern such as `^(x+x+)+$` would take
/// exponential time over stops there (in about 25 ms) and does not match, as `re:run` answers
/// `nomatch` past its limit (`mango_selector` counts that as no match): a hostile pattern costs
/// a bounded time per value, not a core for ever. A pattern that needs between this limit and
/// CouchDB's on one value matches there and not here.
@safe public final class RegexPattern: @unchecked Sendable {
  /// The pattern as written.
  public let source: String
  /// The compiled pattern: read-only once compiled, and PCRE2 lets threads share it ("a
  /// compiled pattern can be used by several threads at once").
  private let code: OpaquePointer

  /// The most backtracking steps of one match (PCRE2's `match_limit`, also its depth limit).
  public static let matchLimit: UInt32 = 1_000_000
  /// The memory backtracking may use, in KiB.
  public static let heapLimitKiB: UInt32 = 16 * 1024

  /// The limits of every match. Not modified after it is made, which is what sharing a context
  /// between threads asks ("a context can be used by several threads ... as long as it is not
  /// changed").
  private nonisolated(unsafe) static let context: OpaquePointer? = {
    guard let context = unsafe pcre2_match_context_create_8(nil) else { return nil }
    unsafe _ = pcre2_set_match_limit_8(context, matchLimit)
    unsafe _ = pcre2_set_depth_limit_8(context, matchLimit)
    unsafe _ = pcre2_set_heap_limit_8(context, heapLimitKiB)
    return unsafe context
  }()

  /// Why a pattern does not compile: PCRE2's message and the offset in the pattern.
  public struct CompileError: Error, CustomStringConvertible {
    public let message: String
    public let offset: Int
    public var description: String { "\(message) at offset \(offset)" }
  }

  /// Compiles `source`.
  ///
  /// - Throws: ``CompileError`` for a pattern PCRE2 refuses (and for one with a NUL, which
  ///   PCRE2 would stop at).
  public init(_ source: String) throws(CompileError) {
    self.source = source
    guard !source.utf8.contains(0) else {
      throw CompileError(message: "the pattern contains a NUL character", offset: 0)
    }
    var errorCode: Int32 = 0
    var errorOffset = 0
    let options = UInt32(PCRE2_UTF) | UInt32(PCRE2_NEVER_BACKSLASH_C)
    let compiled = unsafe source.utf8CString.withUnsafeBufferPointer { buffer in
      unsafe buffer.withMemoryRebound(to: UInt8.self) { bytes in
        unsafe pcre2_compile_8(
          bytes.baseAddress, bytes.count - 1, options, &errorCode, &errorOffset, nil)
      }
    }
    guard let compiled = unsafe compiled else {
      throw CompileError(message: Self.message(errorCode), offset: errorOffset)
    }
    unsafe self.code = compiled
  }

  deinit { unsafe pcre2_code_free_8(code) }

  /// Whether the pattern matches somewhere in `subject`; false also when the match would pass
  /// the limits (as `re:run` gives `nomatch`).
  public func matches(_ subject: String) -> Bool {
    var subject = subject
    return subject.withUTF8 { unsafe matches(bytes: $0) }
  }

  private func matches(bytes: UnsafeBufferPointer<UInt8>) -> Bool {
    guard let base = unsafe bytes.baseAddress else {
      // An empty subject may come without storage; PCRE2 wants a pointer all the same.
      let zero: [UInt8] = [0]
      return unsafe zero.withUnsafeBufferPointer { unsafe match(unsafe $0.baseAddress!, 0) }
    }
    return unsafe match(base, bytes.count)
  }

  /// `pcre2_match` over `count` bytes at `subject`, a string's UTF-8 (valid, as every Swift
  /// string's is: so PCRE2 is told not to check it again). Without memory for the limits or
  /// the match data, nothing matches.
  private func match(_ subject: UnsafePointer<UInt8>, _ count: Int) -> Bool {
    guard let context = unsafe Self.context,
      let data = unsafe pcre2_match_data_create_from_pattern_8(code, nil)
    else { return false }
    defer { unsafe pcre2_match_data_free_8(data) }
    let options = UInt32(PCRE2_NO_UTF_CHECK)
    return unsafe pcre2_match_8(code, subject, count, 0, options, data, context) >= 0
  }

  /// PCRE2's text for an error code.
  private static func message(_ code: Int32) -> String {
    var buffer = [UInt8](repeating: 0, count: 256)
    let n = unsafe pcre2_get_error_message_8(code, &buffer, buffer.count)
    guard n > 0 else { return "error \(code)" }
    return String(decoding: buffer.prefix(Int(n)), as: UTF8.self)
  }
}
