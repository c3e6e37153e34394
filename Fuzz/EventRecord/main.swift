// libFuzzer target: the log's event-record decoder (what `verify`, `tail` and every read run on
// the bytes of data.mdb). Any bytes decode or throw; none crash.
import Foundation
import FuzzDriver

@testable import Log

func decodeAll(position: UInt64, _ raw: UnsafeRawBufferPointer) {
  _ = try? EventRecord.decode(position: position, bytes: raw)
  _ = try? EventRecord.decodeWithLinks(position: position, bytes: raw)
  _ = try? EventRecord.timestamp(of: raw)
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzEventRecord(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
  let raw = UnsafeRawBufferPointer(start: data, count: size)
  let position = UInt64(size % 7 + 1)
  decodeAll(position: position, raw)
  // The same bytes with a valid format byte and checksum, so that the decoder's field parsing
  // (varints, lengths, strings) is reached as it is for a record rewritten with care.
  guard size >= EventRecord.fixedHeaderSize + EventRecord.checksumSize else { return 0 }
  var fixed = Array(raw)
  fixed[0] = EventRecord.format
  let bodyEnd = size - EventRecord.checksumSize
  let crc = fixed.withUnsafeBytes { bytes in
    CRC32C.finalize(
      CRC32C.update(
        CRC32C.update(CRC32C.initial, bigEndian: position),
        UnsafeRawBufferPointer(rebasing: bytes[..<bodyEnd])))
  }
  withUnsafeBytes(of: crc.littleEndian) { fixed.replaceSubrange(bodyEnd..., with: $0) }
  fixed.withUnsafeBytes { decodeAll(position: position, $0) }
  return 0
}

runFuzzer(fuzzEventRecord)
