// libFuzzer target: the JSON parser. Any input parses or throws `JSONParseError`; what parses
// writes out and parses back to the same value. `make fuzz` runs it (see Fuzz/README.md).
import Foundation
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

// SwiftPM links this module's entry point as `main`, in place of libFuzzer's own `main`:
// the top-level code hands the arguments and the target to libFuzzer's driver.
@_silgen_name("LLVMFuzzerRunDriver")
func runFuzzerDriver(
  _ argc: UnsafeMutablePointer<CInt>,
  _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
  _ target: @convention(c) (UnsafePointer<UInt8>, Int) -> CInt
) -> CInt

var argc = CommandLine.argc
var argv = CommandLine.unsafeArgv
exit(runFuzzerDriver(&argc, &argv, { data, size in fuzzJSON(data, size) }))
