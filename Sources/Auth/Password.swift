import Crypto
import Formats
import JSON
import _CryptoExtras

/// Password hashing as CouchDB 3 does it for `_users` documents (couch_users_db, couch_passwords):
/// PBKDF2 with HMAC-SHA-256, the salt a random 32-character hex string used as its ASCII bytes,
/// the derived key written as lowercase hex of the hash's length (32 bytes).
public enum Password {
  /// The iterations for new hashes: OWASP's recommendation for PBKDF2-HMAC-SHA256 (and
  /// CouchDB 3.4's default).
  public static let iterations = 600_000

  /// The PRFs CouchDB accepts in `pbkdf2_prf` (`sha` is HMAC-SHA-1, CouchDB's old default).
  public static let prfs = ["sha", "sha224", "sha256", "sha384", "sha512"]

  /// PBKDF2 of `password` with `salt` (its bytes as given), `iterations` rounds of the PRF named
  /// `prf` (one of ``prfs``), `length` bytes (the hash's size when nil). Nil for an unknown PRF
  /// or a count below 1.
  public static func pbkdf2(
    password: [UInt8], salt: [UInt8], iterations: Int, prf: String = "sha256", length: Int? = nil
  ) -> [UInt8]? {
    let hash: KDF.Insecure.PBKDF2.HashFunction
    let size: Int
    switch prf {
    case "sha": (hash, size) = (.insecureSHA1, 20)
    case "sha224": (hash, size) = (.insecureSHA224, 28)
    case "sha256": (hash, size) = (.sha256, 32)
    case "sha384": (hash, size) = (.sha384, 48)
    case "sha512": (hash, size) = (.sha512, 64)
    default: return nil
    }
    guard iterations > 0 else { return nil }
    guard
      let key = try? KDF.Insecure.PBKDF2.deriveKey(
        from: password, salt: salt, using: hash, outputByteCount: length ?? size,
        unsafeUncheckedRounds: iterations)
    else { return nil }
    return unsafe key.withUnsafeBytes { unsafe Array($0) }
  }

  /// A new salt as CouchDB makes one (`couch_uuids:random()`): 16 random bytes as 32 hex digits.
  public static func newSalt() -> String {
    Hex.encode(Random.bytes(16))
  }

  /// Compares two byte strings in time that depends on their lengths only.
  public static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
    guard a.count == b.count else { return false }
    var difference: UInt8 = 0
    for i in 0..<a.count { difference |= a[i] ^ b[i] }
    return difference == 0
  }
}

/// Random bytes from the system's generator.
enum Random {
  static func bytes(_ count: Int) -> [UInt8] {
    var generator = SystemRandomNumberGenerator()
    return (0..<count).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
  }
}
