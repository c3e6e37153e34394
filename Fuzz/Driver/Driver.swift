// What every fuzz target shares: handing libFuzzer's driver the arguments and the function
// under test. SwiftPM links an executable's entry point as `main`, in place of libFuzzer's own
// `main`, so each target's top-level code calls `runFuzzer(_:)`.
import Foundation

/// The function libFuzzer calls with each input.
public typealias FuzzTarget = @convention(c) (UnsafePointer<UInt8>, Int) -> CInt

@_silgen_name("LLVMFuzzerRunDriver")
func runFuzzerDriver(
  _ argc: UnsafeMutablePointer<CInt>,
  _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
  _ target: FuzzTarget
) -> CInt

/// Runs libFuzzer on `target` with the process's arguments and exits with its status.
public func runFuzzer(_ target: FuzzTarget) -> Never {
  var argc = CommandLine.argc
  var argv = CommandLine.unsafeArgv
  exit(runFuzzerDriver(&argc, &argv, target))
}
