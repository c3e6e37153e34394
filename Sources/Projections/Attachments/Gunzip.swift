import CZlib

/// Decodes a gzip stream, as CouchDB's `zlib:gunzip/1` does for an attachment stored gzip
/// (``AttachmentEncoding``) that is sent decoded.
public enum Gunzip {
  /// The data of the gzip stream `bytes`, or nil when it is not a complete gzip stream.
  public static func decode(_ bytes: [UInt8]) -> [UInt8]? {
    guard case .complete(let output)? = decode(bytes, limit: nil) else { return nil }
    return output
  }

  /// What ``decode(_:limit:)`` found.
  public enum Decoded {
    case complete([UInt8])
    /// The data would be longer than the limit; decoding stopped there.
    case pastLimit
  }

  /// The data of the gzip stream `bytes`, decoding no more than `limit` bytes (nil: no limit);
  /// nil when it is not a complete gzip stream.
  public static func decode(_ bytes: [UInt8], limit: Int?) -> Decoded? {
    let stream = GunzipStream()
    stream.push(bytes)
    var output: [UInt8] = []
    while true {
      guard let piece = stream.pull(upTo: 64 << 10) else { return nil }
      if piece.isEmpty { break }
      output += piece
      if let limit, output.count > limit { return .pastLimit }
    }
    return stream.isFinished ? .complete(output) : nil
  }
}

/// A gzip stream decoded a piece at a time, with bounded memory whatever the compression
/// ratio: ``push(_:)`` gives it input, ``pull(upTo:)`` takes at most that much output, and
/// returns empty when it needs more input (or the stream ended, ``isFinished``).
///
/// ```swift
/// let stream = GunzipStream()
/// for chunk in gzipChunks {
///   stream.push(chunk)
///   while let out = stream.pull(upTo: 1 << 20), !out.isEmpty { send(out) }
/// }
/// stream.isFinished   // true when the gzip stream was complete
/// ```
///
/// Used by one task at a time. Its `z_stream`'s pointers point into buffers only during
/// ``pull(upTo:)``.
@safe public final class GunzipStream: @unchecked Sendable {
  private var stream = unsafe z_stream()
  private let ok: Bool
  /// Input not consumed yet: `input[consumed...]`.
  private var input: [UInt8] = []
  private var consumed = 0
  private var failed = false
  /// Whether the end of the gzip stream was decoded.
  public private(set) var isFinished = false

  public init() {
    ok = unsafe wikilog_inflate_init_gzip(&stream) == Z_OK
  }

  deinit {
    if ok { unsafe _ = inflateEnd(&stream) }
  }

  /// Adds input (bytes after the end of the stream are ignored).
  public func push(_ bytes: [UInt8]) {
    if consumed == input.count {
      input = bytes
    } else {
      input = Array(input[consumed...]) + bytes
    }
    consumed = 0
  }

  /// At most `limit` bytes of output; empty when the input pushed so far is used up or the
  /// stream ended; nil when the input is not gzip.
  public func pull(upTo limit: Int) -> [UInt8]? {
    guard ok, !failed else { return nil }
    if isFinished || limit <= 0 { return [] }
    var output = [UInt8](repeating: 0, count: limit)
    var produced = 0
    // Input can be consumed with no output yet (the header): go on until there is some.
    repeat {
      var rc: Int32 = Z_OK
      let start = consumed
      let available = input.count - start
      let have = produced
      var used = 0
      produced += unsafe input.withUnsafeMutableBufferPointer { inBuffer in
        unsafe output.withUnsafeMutableBufferPointer { outBuffer -> Int in
          unsafe stream.next_in = inBuffer.baseAddress.map { unsafe $0 + start }
          unsafe stream.avail_in = UInt32(available)
          unsafe stream.next_out = outBuffer.baseAddress.map { unsafe $0 + have }
          unsafe stream.avail_out = UInt32(outBuffer.count - have)
          rc = unsafe inflate(&stream, Z_NO_FLUSH)
          used = unsafe available - Int(stream.avail_in)
          let produced = unsafe outBuffer.count - have - Int(stream.avail_out)
          unsafe stream.next_in = nil
          unsafe stream.next_out = nil
          return produced
        }
      }
      consumed += used
      switch rc {
      case Z_STREAM_END: isFinished = true
      case Z_OK, Z_BUF_ERROR: break
      default:
        failed = true
        return nil
      }
      if rc == Z_BUF_ERROR { break }
    } while produced == 0 && consumed < input.count && !isFinished
    output.removeLast(limit - produced)
    return output
  }
}
