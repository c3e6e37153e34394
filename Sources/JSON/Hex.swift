/// Hexadecimal digits, shared by the parser's `\u` escapes and the revision ids of RevTree.
@usableFromInline
package enum Hex {
  /// The value of one hexadecimal digit (either case), or nil.
  @inlinable
  package static func value(_ b: UInt8) -> UInt8? {
    switch b {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): b &- UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): b &- UInt8(ascii: "a") &+ 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): b &- UInt8(ascii: "A") &+ 10
    default: nil
    }
  }
}
