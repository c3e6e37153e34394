import CICU

/// ICU's root collation, through the `CICU` shim: the sort keys ``Collation`` encodes strings
/// with.
enum ICUCollation {
  /// Appends the ICU sort key of `s` (ending with its only zero byte) to `out`.
  static func appendSortKey(of s: String, to out: inout [UInt8]) {
    var text = s
    text.withUTF8 { utf8 in
      let start = out.count
      // Sort keys of short strings are a little over 2 bytes per character (three levels).
      var capacity = utf8.count * 4 + 16
      while true {
        out.append(contentsOf: repeatElement(0, count: capacity))
        let written = unsafe out.withUnsafeMutableBufferPointer { buffer in
          unsafe utf8.withMemoryRebound(to: CChar.self) { chars in
            unsafe wikilog_icu_sort_key(
              chars.baseAddress, Int32(chars.count), buffer.baseAddress! + start,
              Int32(capacity))
          }
        }
        if written < 0 {
          // ICU failed (it cannot open its data): the string's bytes, still a total order.
          out.removeSubrange(start...)
          out.append(contentsOf: unsafe utf8.map { $0 == 0 ? 1 : $0 })
          out.append(0)
          return
        }
        if Int(written) <= capacity {
          out.removeSubrange((start + Int(written))...)
          return
        }
        out.removeSubrange(start...)
        capacity = Int(written)
      }
    }
  }

  /// The version of the Unicode Collation Algorithm ICU implements ("13.0.0" for ICU 72).
  static var version: String {
    unsafe String(cString: wikilog_icu_uca_version())
  }
}

/// The collation driver's versions, as CouchDB's `/_node/{node}/_versions` reports them under
/// `collation_driver` (`"72.1"`: trailing zero parts left out, as `couch_util:version_to_binary`
/// does).
public enum CollationDriver {
  /// `libicu`, as CouchDB names it.
  public static let name = "libicu"
  /// ICU's version (`library_version`), its collation algorithm's
  /// (`collation_algorithm_version`) and the root collator's (`collator_version`).
  public static let versions: (library: String, algorithm: String, collator: String) = {
    var out = [UInt8](repeating: 0, count: 12)
    unsafe out.withUnsafeMutableBufferPointer { unsafe wikilog_icu_versions($0.baseAddress!) }
    func text(_ parts: ArraySlice<UInt8>) -> String {
      var numbers = Array(parts)
      while numbers.count > 1, numbers.last == 0 { numbers.removeLast() }
      return numbers.map(String.init).joined(separator: ".")
    }
    return (text(out[0..<4]), text(out[4..<8]), text(out[8..<12]))
  }()
}
