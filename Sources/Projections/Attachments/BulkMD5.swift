import Crypto
import Foundation

/// MD5 of attachment bytes, computed by the BoringSSL that swift-crypto builds (its assembly is
/// about twice as fast as `RevTree.MD5` on large inputs; an upload's MD5 was half of the
/// server's time). The digests are the same; `RevTree.MD5` stays for revision ids, whose inputs
/// are small.
///
/// ```swift
/// var md5 = BulkMD5()
/// md5.update(chunk)          // a MiB at a time
/// let digest = md5.finalize() // 16 bytes
/// ```
struct BulkMD5 {
  private var hasher = Insecure.MD5()

  mutating func update(_ bytes: [UInt8]) {
    hasher.update(data: bytes)
  }

  func finalize() -> [UInt8] {
    Array(hasher.finalize())
  }

  static func hash(_ bytes: [UInt8]) -> [UInt8] {
    var md5 = BulkMD5()
    md5.update(bytes)
    return md5.finalize()
  }
}
