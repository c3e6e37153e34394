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
