import Crypto
import Formats

#if canImport(FoundationEssentials)
  public import FoundationEssentials
#else
  public import Foundation
#endif

/// A tree head signed with the log's Ed25519 key: what an auditor keeps and publishes.
///
/// The signature covers exactly these UTF-8 bytes (``signedBytes``), each line ending in `\n`:
/// ```
/// wikilog tree head v1
/// <size, decimal>
/// <root, 64 lowercase hex digits>
/// <time, as given: ISO-8601 UTC with milliseconds, e.g. 2026-11-26T01:02:03.456Z>
/// ```
/// A head made by a key holder at a size the log never had still verifies: the signature says
/// who vouches for the head, the proofs say how heads and events relate.
public struct SignedTreeHead: Sendable, Hashable {
  public var size: UInt64
  public var root: MerkleTree.Hash
  /// When it was signed, as signed.
  public var time: String
  /// The Ed25519 signature of ``signedBytes``, 64 bytes.
  public var signature: [UInt8]
  /// The signer's Ed25519 public key, 32 bytes (raw).
  public var publicKey: [UInt8]

  public init(
    size: UInt64, root: MerkleTree.Hash, time: String, signature: [UInt8], publicKey: [UInt8]
  ) {
    self.size = size
    self.root = root
    self.time = time
    self.signature = signature
    self.publicKey = publicKey
  }

  /// The bytes the signature covers.
  public static func signedBytes(size: UInt64, root: MerkleTree.Hash, time: String) -> [UInt8] {
    Array("wikilog tree head v1\n\(size)\n\(Hex.encode(root))\n\(time)\n".utf8)
  }

  public var signedBytes: [UInt8] { Self.signedBytes(size: size, root: root, time: time) }

  /// Whether the signature is `publicKey`'s over this head.
  public func isSigned(by publicKey: [UInt8]) -> Bool {
    guard let key = try? Curve25519.Signing.PublicKey(rawRepresentation: publicKey) else {
      return false
    }
    return key.isValidSignature(signature, for: signedBytes)
  }

  /// A short name for a public key: the first 8 bytes of its SHA-256, in hex.
  public static func keyID(_ publicKey: [UInt8]) -> String {
    Hex.encode(Array(SHA256.hash(data: publicKey).prefix(8)))
  }

  /// `date` as a head's time: ISO-8601 UTC with milliseconds.
  public static func timeString(_ date: Date) -> String {
    let ms = Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
    return ISO8601.format(microseconds: ms * 1000, fractionDigits: 3)
  }
}

extension EventLog {
  /// The file in the log's directory holding its Ed25519 signing key.
  public static let signingKeyFile = "log.key"

  /// The log's Ed25519 public key (32 bytes); with `create`, a key is made when the log has none
  /// yet (`created` is then true).
  ///
  /// The key lives in ``signingKeyFile`` in the log's directory, mode 0600, as one line:
  /// `ed25519 <base64 of the 32-byte private key>`.
  public func publicKey(create: Bool = true) throws(LogError) -> (key: [UInt8], created: Bool) {
    let (key, created) = try signingKey(create: create)
    return (Array(key.publicKey.rawRepresentation), created)
  }

  /// Signs the current tree head; `keyCreated` is true when the log had no key and one was made.
  public func signedTreeHead(at date: Date = Date()) throws(LogError) -> (
    head: SignedTreeHead, keyCreated: Bool
  ) {
    let (key, created) = try signingKey(create: true)
    let head = try treeHead()
    let time = SignedTreeHead.timeString(date)
    let bytes = SignedTreeHead.signedBytes(size: head.size, root: head.root, time: time)
    let signature: [UInt8]
    do {
      signature = Array(try key.signature(for: bytes))
    } catch {
      throw LogError.storage(code: -1, operation: "sign", message: "\(error)")
    }
    return (
      SignedTreeHead(
        size: head.size, root: head.root, time: time, signature: signature,
        publicKey: Array(key.publicKey.rawRepresentation)),
      created
    )
  }

  private func signingKey(create: Bool) throws(LogError) -> (
    Curve25519.Signing.PrivateKey, Bool
  ) {
    let file = path + "/" + Self.signingKeyFile
    for _ in 0..<2 {
      if let data = FileManager.default.contents(atPath: file) {
        let text =
          String(decoding: data, as: UTF8.self).split(separator: "\n").first.map(String.init) ?? ""
        guard text.hasPrefix("ed25519 "),
          let raw = Base64.decode(String(text.dropFirst("ed25519 ".count))),
          let key = try? Curve25519.Signing.PrivateKey(rawRepresentation: raw)
        else {
          throw LogError.corruptDatabase(path: file, reason: "the signing key file is malformed")
        }
        return (key, false)
      }
      guard create else {
        throw LogError.notALog(path: path, reason: "it has no signing key (\(Self.signingKeyFile))")
      }
      let key = Curve25519.Signing.PrivateKey()
      let line = "ed25519 " + Base64.encode(Array(key.rawRepresentation)) + "\n"
      // O_EXCL: of two processes making a key at once, one wins and the other reads its key.
      guard try FileOperations.createExclusive(file, Array(line.utf8), mode: 0o600) else {
        continue
      }
      return (key, true)
    }
    throw LogError.permissionDenied(path: file)
  }
}
