import Crypto
import Formats
public import Foundation
import JSON
public import Projections
import _CryptoExtras

/// Verifies JSON Web Tokens (`Authorization: Bearer ...`) as CouchDB's `jwt_authentication_handler`
/// and `jwtf` do: HS256/384/512 (a shared secret), RS256/384/512 and ES256/384/512 (public keys
/// in PEM; EC keys on P-256), the key chosen by the header's `kid` (`_default` without one),
/// `exp` required by default (`[jwt_auth] required_claims = exp`, which may also require a
/// claim's value: `{iss, "hello"}`), `sub` as the user's name and roles from the
/// `_couchdb.roles` claim (`roles_claim_name`), or the claim a path names
/// (`roles_claim_path`, `.` between names, `\.` within one): a list of strings, or one
/// comma-separated string.
///
/// One choice stricter than CouchDB: `exp` and `nbf` are checked whenever present (CouchDB
/// checks only required ones), so an expired token is refused even where `exp` is not
/// required. The algorithms allowed are HS256, RS256 and ES256 unless
/// ``allowedAlgorithms`` says otherwise (CouchDB's `allowed_algorithms`).
///
/// Errors are CouchDB's: a malformed token, an unknown `kid`, a bad signature are 400
/// `bad_request`; an expired token (or one not valid yet) is 401 `unauthorized`.
public struct JWTVerifier: Sendable {
  /// The claims that must be present (CouchDB's `required_claims`): `exp` by default.
  public var requiredClaims: Set<String> = ["exp"]
  /// Claims that must be present with a given string value (`{iss, "hello"}` in CouchDB's
  /// `required_claims`).
  public var requiredClaimValues: [String: String] = [:]
  /// The claim holding the roles.
  public var rolesClaim = "_couchdb.roles"
  /// The nested claim holding the roles, by the names on its path (CouchDB's
  /// `roles_claim_path`); it wins over ``rolesClaim``, and a token without it is `404`.
  public var rolesClaimPath: [String]? = nil
  /// The algorithms a token may be signed with (CouchDB's `allowed_algorithms`).
  public var allowedAlgorithms: Set<String> = ["HS256", "RS256", "ES256"]
  /// Every algorithm wikilog verifies.
  public static let algorithms: Set<String> = [
    "HS256", "HS384", "HS512", "RS256", "RS384", "RS512", "ES256", "ES384", "ES512",
  ]
  var hmacKeys: [String: [UInt8]] = [:]
  var rsaKeys: [String: _RSA.Signing.PublicKey] = [:]
  /// P-256 keys in their X9.63 form (the key type is not Sendable in swift-crypto 3).
  var ecKeys: [String: [UInt8]] = [:]
  let now: @Sendable () -> Date

  public init(now: @escaping @Sendable () -> Date = { Date() }) {
    self.now = now
  }

  /// The key id used when a token names none.
  public static let defaultKeyID = "_default"

  /// An HS256 secret (`[jwt_keys] hmac:KID = base64`; here the secret's bytes).
  public mutating func addHMACKey(_ secret: [UInt8], kid: String = defaultKeyID) {
    hmacKeys[kid] = secret
  }

  /// An RS256 public key in PEM (`-----BEGIN PUBLIC KEY-----`), 2048 bits or more.
  public mutating func addRSAKey(pem: String, kid: String = defaultKeyID) throws {
    rsaKeys[kid] = try _RSA.Signing.PublicKey(pemRepresentation: pem)
  }

  /// An ES256 (P-256) public key in PEM.
  public mutating func addECKey(pem: String, kid: String = defaultKeyID) throws {
    ecKeys[kid] = Array(try P256.Signing.PublicKey(pemRepresentation: pem).x963Representation)
  }

  /// Removes the key of `kid` of a type (`hmac`, `rsa` or `ec`).
  public mutating func removeKey(type: String, kid: String) {
    switch type {
    case "hmac": hmacKeys[kid] = nil
    case "rsa": rsaKeys[kid] = nil
    case "ec": ecKeys[kid] = nil
    default: break
    }
  }

  /// Reads CouchDB's `required_claims` (`exp, iat` or `{iss, "hello"}`, separated by commas)
  /// into ``requiredClaims`` and ``requiredClaimValues``; nil when it is not of that form.
  public static func requiredClaims(parsing text: String) -> (Set<String>, [String: String])? {
    var names: Set<String> = []
    var values: [String: String] = [:]
    var rest = Substring(text)
    func skipSpace() { rest = rest.drop { $0 == " " || $0 == "," } }
    skipSpace()
    while !rest.isEmpty {
      if rest.first == "{" {
        guard let close = rest.firstIndex(of: "}") else { return nil }
        let inner = rest[rest.index(after: rest.startIndex)..<close]
        let parts = inner.split(separator: ",", maxSplits: 1)
        guard parts.count == 2 else { return nil }
        let key = parts[0].trimmingCharacters(in: .whitespaces)
        let quoted = parts[1].trimmingCharacters(in: .whitespaces)
        guard !key.isEmpty, key.allSatisfy({ $0.isASCII && $0.isLowercase }),
          quoted.count >= 2, quoted.hasPrefix("\""), quoted.hasSuffix("\"")
        else { return nil }
        values[key] = String(quoted.dropFirst().dropLast())
        rest = rest[rest.index(after: close)...]
      } else {
        let word = rest.prefix { $0.isASCII && $0.isLowercase }
        guard !word.isEmpty else { return nil }
        names.insert(String(word))
        rest = rest.dropFirst(word.count)
      }
      skipSpace()
    }
    return (names, values)
  }

  /// Reads CouchDB's `roles_claim_path`: names split at `.` but not `\.`, which stands for a
  /// dot within a name.
  public static func rolesClaimPath(parsing text: String) -> [String] {
    var names: [String] = []
    var current = ""
    var escaped = false
    for c in text {
      if escaped {
        if c != "." { current.append("\\") }
        current.append(c)
        escaped = false
      } else if c == "\\" {
        escaped = true
      } else if c == "." {
        names.append(current)
        current = ""
      } else {
        current.append(c)
      }
    }
    if escaped { current.append("\\") }
    names.append(current)
    return names
  }

  /// Whether any key is configured.
  public var hasKeys: Bool { !hmacKeys.isEmpty || !rsaKeys.isEmpty || !ecKeys.isEmpty }

  /// The user a token signs in.
  public func verify(_ token: String) throws(AuthError) -> UserContext {
    let parts = token.split(separator: ".", omittingEmptySubsequences: false)
    guard parts.count == 3 else { throw .badRequest("Malformed token") }
    let header = try Self.object(parts[0])
    let claims = try Self.object(parts[1])
    guard let alg = header["alg"]?.stringValue else {
      throw .badRequest("Missing alg header parameter")
    }
    if let typ = header["typ"], typ.stringValue != "JWT" {
      throw .badRequest("Invalid typ header parameter")
    }
    guard allowedAlgorithms.contains(alg), Self.algorithms.contains(alg) else {
      throw .badRequest("Invalid alg header parameter")
    }
    try checkClaims(claims)
    let kid: String
    if let named = header["kid"] {
      guard let name = named.stringValue else { throw .badRequest("Unknown kid") }
      kid = name
    } else {
      kid = Self.defaultKeyID
    }
    guard let signature = Base64.decodeURL(parts[2]) else { throw .badRequest("Malformed token") }
    let message = Array((parts[0] + "." + parts[1]).utf8)
    func digest<H: HashFunction>(_: H.Type) -> H.Digest { H.hash(data: message) }
    switch alg.prefix(2) {
    case "HS":
      guard let key = hmacKeys[kid] else { throw .badRequest("Unknown kid") }
      let symmetric = SymmetricKey(data: key)
      let valid =
        switch alg {
        case "HS384":
          HMAC<SHA384>.isValidAuthenticationCode(
            signature, authenticating: message, using: symmetric)
        case "HS512":
          HMAC<SHA512>.isValidAuthenticationCode(
            signature, authenticating: message, using: symmetric)
        default:
          HMAC<SHA256>.isValidAuthenticationCode(
            signature, authenticating: message, using: symmetric)
        }
      guard valid else { throw .badRequest("Bad HMAC") }
    case "RS":
      guard let key = rsaKeys[kid] else { throw .badRequest("Unknown kid") }
      let rsa = _RSA.Signing.RSASignature(rawRepresentation: signature)
      let valid =
        switch alg {
        case "RS384":
          key.isValidSignature(rsa, for: digest(SHA384.self), padding: .insecurePKCS1v1_5)
        case "RS512":
          key.isValidSignature(rsa, for: digest(SHA512.self), padding: .insecurePKCS1v1_5)
        default:
          key.isValidSignature(rsa, for: digest(SHA256.self), padding: .insecurePKCS1v1_5)
        }
      guard valid else { throw .badRequest("Bad signature") }
    default:
      guard let key = ecKeys[kid] else { throw .badRequest("Unknown kid") }
      guard let publicKey = try? P256.Signing.PublicKey(x963Representation: key),
        let raw = Self.p256Signature(signature),
        let ecdsa = try? P256.Signing.ECDSASignature(rawRepresentation: raw)
      else { throw .badRequest("Bad signature") }
      let valid =
        switch alg {
        case "ES384": publicKey.isValidSignature(ecdsa, for: digest(SHA384.self))
        case "ES512": publicKey.isValidSignature(ecdsa, for: digest(SHA512.self))
        default: publicKey.isValidSignature(ecdsa, for: digest(SHA256.self))
        }
      guard valid else { throw .badRequest("Bad signature") }
    }
    guard let sub = claims["sub"] else { throw .unauthorized("Token missing sub claim.") }
    guard let name = sub.stringValue else { throw .badRequest("Malformed token") }
    return UserContext(name: name, roles: try roles(claims))
  }

  private func checkClaims(_ claims: JSONObject) throws(AuthError) {
    for claim in requiredClaims.union(requiredClaimValues.keys).sorted()
    where claims[claim] == nil {
      throw .badRequest("Missing \(claim) claim")
    }
    for (claim, value) in requiredClaimValues.sorted(by: { $0.key < $1.key })
    where claims[claim] != .string(value) {
      throw .badRequest("Invalid \(claim)")
    }
    let time = now().timeIntervalSince1970
    if let iat = claims["iat"], requiredClaims.contains("iat"),
      iat.numberValue?.int64Value == nil
    {
      throw .badRequest("Invalid iat claim")
    }
    if let nbf = claims["nbf"] {
      guard let value = nbf.numberValue?.doubleValue else { throw .badRequest("Invalid nbf claim") }
      guard value < time else { throw .unauthorized("nbf not in past") }
    }
    if let exp = claims["exp"] {
      guard let value = exp.numberValue?.doubleValue else { throw .badRequest("Invalid exp claim") }
      guard value > time else { throw .unauthorized("exp not in future") }
    }
  }

  private func roles(_ claims: JSONObject) throws(AuthError) -> [String] {
    let found: JSONValue?
    if let path = rolesClaimPath {
      var value: JSONValue? = .object(claims)
      for name in path { value = value?.objectValue?[name] }
      // As `couch_util:get_nested_json_value`: a path the token does not have is not found.
      guard let value else { throw AuthError(status: 404, error: "not_found", reason: "missing") }
      found = value
    } else {
      found = claims[rolesClaim]
    }
    guard let value = found else { return [] }
    if let text = value.stringValue {
      return text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        .filter { !$0.isEmpty }
    }
    guard let list = value.arrayValue else { throw .badRequest("Malformed token") }
    var roles: [String] = []
    for role in list {
      guard let role = role.stringValue else { throw .badRequest("Malformed token") }
      roles.append(role)
    }
    return roles
  }

  /// A JOSE ECDSA signature (`r` then `s`, each as wide as the algorithm's hash: `jwtf` writes
  /// an ES384 signature of a P-256 key with 48-byte numbers) as P-256's 32-byte `r` and `s`;
  /// nil when a number does not fit.
  static func p256Signature(_ signature: [UInt8]) -> [UInt8]? {
    guard !signature.isEmpty, signature.count % 2 == 0 else { return nil }
    let half = signature.count / 2
    var out: [UInt8] = []
    for number in [signature[..<half], signature[half...]] {
      let significant = number.drop { $0 == 0 }
      guard significant.count <= 32 else { return nil }
      out += [UInt8](repeating: 0, count: 32 - significant.count) + significant
    }
    return out
  }

  private static func object(_ part: Substring) throws(AuthError) -> JSONObject {
    guard let bytes = Base64.decodeURL(part), let value = try? JSONValue(parsing: bytes) else {
      throw .badRequest("Malformed token")
    }
    guard let object = value.objectValue else { throw .badRequest("Not an object") }
    return object
  }
}
