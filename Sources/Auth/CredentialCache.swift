import Crypto
import Formats
import JSON
import Synchronization

/// Passwords already checked, so that PBKDF2 runs once per user and password (CouchDB's
/// couch_passwords_cache): the key is the user's stored hash (name, salt, iterations, PRF,
/// derived key), so a password change (a new salt and key) misses; the value is an HMAC of the
/// password under a key made at random for this process, never the password. Bounded: past
/// ``capacity`` entries the least recently used goes.
final class CredentialCache: Sendable {
  let capacity: Int
  /// The key of the password MACs, made at random for this process.
  private let key = Random.bytes(32)
  private struct State {
    var entries: [String: (mac: [UInt8], used: UInt64)] = [:]
    var clock: UInt64 = 0
  }
  private let state = Mutex(State())

  init(capacity: Int = 1_000) {
    self.capacity = capacity
  }

  private static func slot(_ name: String, _ c: StoredCredentials) -> String {
    [name, c.salt, String(c.iterations), c.prf, Hex.encode(c.derivedKey)].joined(separator: "\u{0}")
  }

  private func mac(_ password: String) -> [UInt8] {
    Array(
      HMAC<SHA256>.authenticationCode(for: Array(password.utf8), using: SymmetricKey(data: key)))
  }

  /// Whether `password` was verified before against exactly these stored credentials.
  func contains(_ name: String, _ credentials: StoredCredentials, password: String) -> Bool {
    let slot = Self.slot(name, credentials)
    let presented = mac(password)
    return state.withLock { s in
      guard let entry = s.entries[slot] else { return false }
      guard Password.constantTimeEqual(entry.mac, presented) else { return false }
      s.clock += 1
      s.entries[slot] = (entry.mac, s.clock)
      return true
    }
  }

  func insert(_ name: String, _ credentials: StoredCredentials, password: String) {
    let slot = Self.slot(name, credentials)
    let value = mac(password)
    state.withLock { s in
      s.clock += 1
      s.entries[slot] = (value, s.clock)
      if s.entries.count > capacity,
        let oldest = s.entries.min(by: { $0.value.used < $1.value.used })
      {
        s.entries.removeValue(forKey: oldest.key)
      }
    }
  }

  var count: Int { state.withLock { $0.entries.count } }
}
