// libFuzzer target: the JSON parser. Any input parses or throws `JSONParseError`; what parses
// writes out and parses back to the same value. `make fuzz` runs it (see Fuzz/README.md).
import Foundation
import FuzzDriver
import JSON

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzJSON(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
  let bytes = Array(UnsafeBufferPointer(start: data, count: size))
  guard let value = try? JSONValue(parsing: bytes) else { return 0 }
  let written = value.serialized()
  guard let again = try? JSONValue(parsing: written) else {
    fatalError("written JSON does not parse: \(String(decoding: written, as: UTF8.self))")
  }
  if again != value, again.serialized() != written {
    fatalError("JSON round trip changed the value")
  }
  return 0
}

runFuzzer(fuzzJSON)
