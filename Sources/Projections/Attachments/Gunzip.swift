import CZlib

/// Decodes a gzip stream, as CouchDB's `zlib:gunzip/1` does for an attachment stored gzip
/// (``AttachmentEncoding``) that is sent decoded.
public enum Gunzip {
  /// The data of the gzip stream `bytes`, or nil when it is not a complete gzip stream.
  public static func decode(_ bytes: [UInt8]) -> [UInt8]? {
    let stream = InflateStream()
    return stream.run(bytes)
  }
}

/// The `z_stream` of one decoding, freed with it. Its pointers point into buffers only during
/// ``run(_:)``.
@safe private final class InflateStream {
  private var stream = unsafe z_stream()
  private let ok: Bool

  init() {
    ok = unsafe wikilog_inflate_init_gzip(&stream) == Z_OK
  }

  deinit {
    if ok { unsafe _ = inflateEnd(&stream) }
  }

  func run(_ input: [UInt8]) -> [UInt8]? {
    guard ok else { return nil }
    var output: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 64 << 10)
    var input = input
    let inputCount = input.count
    var rc: Int32 = Z_OK
    unsafe input.withUnsafeMutableBufferPointer { inBuffer in
      unsafe stream.next_in = inBuffer.baseAddress
      unsafe stream.avail_in = UInt32(inputCount)
      repeat {
        let produced = unsafe buffer.withUnsafeMutableBufferPointer { outBuffer -> Int in
          unsafe stream.next_out = outBuffer.baseAddress
          unsafe stream.avail_out = UInt32(outBuffer.count)
          rc = unsafe inflate(&stream, Z_NO_FLUSH)
          return unsafe outBuffer.count - Int(stream.avail_out)
        }
        output += buffer[0..<produced]
      } while unsafe rc == Z_OK && (stream.avail_out == 0 || stream.avail_in > 0)
      unsafe stream.next_in = nil
    }
    return rc == Z_STREAM_END ? output : nil
  }
}
