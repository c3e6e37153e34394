import CZlib
import RevTree

/// How CouchDB stores an attachment's bytes, which decides the digest its stubs and its
/// revision ids carry.
///
/// CouchDB gzips an attachment uploaded without an encoding when its type is compressible
/// (`[attachments] compressible_types`, by default `text/*, application/javascript,
/// application/json, application/xml`) at `compression_level` 8, and keeps the MD5 of the bytes
/// it stored (`couch_db:with_stream/3`): for a compressible type that is the MD5 of the gzip
/// stream, not of the data. The stub then says `"encoding":"gzip"` and `"encoded_length"`.
/// zlib writes the same stream for the same input and settings (window 2^15 with a gzip
/// wrapper, memory level 8, the default strategy), so wikilog stores the same bytes and gets
/// the same digest, and the revision id of an edit with attachments agrees with CouchDB's.
///
/// ```swift
/// AttachmentEncoding.isCompressible("text/plain; charset=utf-8")   // true
/// AttachmentEncoding.isCompressible("image/png")                   // false
/// let stored = AttachmentEncoding.stored(Array("hello".utf8), contentType: "text/plain")
/// stored.encoding      // "gzip"
/// ```
public enum AttachmentEncoding {
  /// CouchDB's default `compressible_types`: a `*` matches anything.
  public static let compressibleTypes = [
    "text/*", "application/javascript", "application/json", "application/xml",
  ]

  /// CouchDB's default `compression_level`.
  public static let compressionLevel: Int32 = 8

  /// Whether CouchDB gzips an attachment of `contentType` (`couch_db:compressible_att_type/1`:
  /// each type as a case-insensitive pattern, optional surrounding whitespace and `;`
  /// parameters allowed).
  public static func isCompressible(_ contentType: String) -> Bool {
    let type = contentType.drop { $0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r" }
      .lowercased()
    for pattern in compressibleTypes {
      if pattern.hasSuffix("*") {
        if type.hasPrefix(pattern.dropLast()) { return true }
        continue
      }
      guard type.hasPrefix(pattern) else { continue }
      let rest = type.dropFirst(pattern.count).drop { $0 == " " || $0 == "\t" }
      if rest.isEmpty || rest.first == ";" { return true }
      if rest.allSatisfy({ $0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r" }) { return true }
    }
    return false
  }

  /// The bytes stored for `data` uploaded with `contentType` and no encoding, and their
  /// encoding: `"gzip"` for a compressible type, nil (identity) otherwise.
  public static func stored(_ data: [UInt8], contentType: String) -> (
    bytes: [UInt8], encoding: String?
  ) {
    isCompressible(contentType) ? (gzip(data), "gzip") : (data, nil)
  }

  /// The MD5 of `bytes`, as its 16 bytes.
  public static func md5(_ bytes: [UInt8]) -> [UInt8] {
    BulkMD5.hash(bytes)
  }

  /// `data` gzipped as CouchDB's `couch_stream` does it.
  public static func gzip(_ data: [UInt8], level: Int32 = compressionLevel) -> [UInt8] {
    var encoder = GzipEncoder(level: level)
    var out = encoder.update(data)
    out += encoder.finish()
    return out
  }
}

/// A streaming gzip encoder with CouchDB's settings (``AttachmentEncoding``): feed it chunks,
/// then finish. zlib's output does not depend on how the input is split.
public struct GzipEncoder: ~Copyable {
  private let state: ZStream

  public init(level: Int32 = AttachmentEncoding.compressionLevel) {
    state = ZStream(level: level)
  }

  /// Compresses `chunk`, returning the output zlib has ready.
  public mutating func update(_ chunk: [UInt8]) -> [UInt8] {
    state.run(chunk, flush: Z_NO_FLUSH)
  }

  /// Ends the stream, returning the rest of the output.
  public consuming func finish() -> [UInt8] {
    state.run([], flush: Z_FINISH)
  }
}

/// The `z_stream` of a ``GzipEncoder``, freed with it. Its pointers point into buffers only
/// during ``run(_:flush:)``.
@safe private final class ZStream {
  private var stream = unsafe z_stream()

  init(level: Int32) {
    let rc = unsafe wikilog_deflate_init_gzip(&stream, level)
    precondition(rc == Z_OK, "deflateInit2 failed (\(rc))")
  }

  deinit {
    unsafe _ = deflateEnd(&stream)
  }

  func run(_ input: [UInt8], flush: Int32) -> [UInt8] {
    var output: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 64 << 10)
    var input = input
    let inputCount = input.count
    unsafe input.withUnsafeMutableBufferPointer { inBuffer in
      unsafe stream.next_in = inBuffer.baseAddress
      unsafe stream.avail_in = UInt32(inputCount)
      repeat {
        let produced = unsafe buffer.withUnsafeMutableBufferPointer { outBuffer -> Int in
          unsafe stream.next_out = outBuffer.baseAddress
          unsafe stream.avail_out = UInt32(outBuffer.count)
          unsafe _ = deflate(&stream, flush)
          return unsafe outBuffer.count - Int(stream.avail_out)
        }
        output += buffer[0..<produced]
      } while unsafe stream.avail_out == 0 || (flush == Z_FINISH && stream.avail_in > 0)
      unsafe stream.next_in = nil
    }
    return output
  }
}
