import Crypto
import Formats
public import Foundation
import JSON
public import Projections
import _CryptoExtras

/// Verifies JSON Web Tokens (`Authorization: Bearer ...`) as CouchDB's `jwt_authentication_handler`
/// and `jwtf` do: HS256 (a shared secret), RS256 and ES256 (public keys in PEM), the key chosen
/// by the header's `kid` (`_default` without one), `exp` required by default
/// (`[jwt_auth] required_claims = exp`), `sub` as the user's name and roles from the
/// `_couchdb.roles` claim (a list of strings, or one comma-separated string).
///
/// Two choices stricter than CouchDB: `exp` and `nbf` are checked whenever present (CouchDB
/// checks only required ones), and the algorithms are these three.
///
/// Errors are CouchDB's: a malformed token, an unknown `kid`, a bad signature are 400
/// `bad_request`; an expired token (or one not valid yet) is 401 `unauthorized`.
public struct JWTVerifier: Sendable {
  /// The claims that must be present (CouchDB's `required_claims`): `exp` by default.
  public var requiredClaims: Set<String> = ["exp"]
  /// The claim holding the roles.
  public var rolesClaim = "_couchdb.roles"
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
    guard ["HS256", "RS256", "ES256"].contains(alg) else {
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
    switch alg {
    case "HS256":
      guard let key = hmacKeys[kid] else { throw .badRequest("Unknown kid") }
      guard
        HMAC<SHA256>.isValidAuthenticationCode(
          signature, authenticating: message, using: SymmetricKey(data: key))
      else { throw .badRequest("Bad HMAC") }
    case "RS256":
      guard let key = rsaKeys[kid] else { throw .badRequest("Unknown kid") }
      guard
        key.isValidSignature(
          _RSA.Signing.RSASignature(rawRepresentation: signature), for: message,
          padding: .insecurePKCS1v1_5)
      else { throw .badRequest("Bad signature") }
    default:
      guard let key = ecKeys[kid] else { throw .badRequest("Unknown kid") }
      guard let publicKey = try? P256.Signing.PublicKey(x963Representation: key),
        let ecdsa = try? P256.Signing.ECDSASignature(rawRepresentation: signature),
        publicKey.isValidSignature(ecdsa, for: message)
      else { throw .badRequest("Bad signature") }
    }
    guard let sub = claims["sub"] else { throw .unauthorized("Token missing sub claim.") }
    guard let name = sub.stringValue else { throw .badRequest("Malformed token") }
    return UserContext(name: name, roles: try roles(claims))
  }

  private func checkClaims(_ claims: JSONObject) throws(AuthError) {
    for claim in requiredClaims.sorted() where claims[claim] == nil {
      throw .badRequest("Missing \(claim) claim")
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
    guard let value = claims[rolesClaim] else { return [] }
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

  private static func object(_ part: Substring) throws(AuthError) -> JSONObject {
    guard let bytes = Base64.decodeURL(part), let value = try? JSONValue(parsing: bytes) else {
      throw .badRequest("Malformed token")
    }
    guard let object = value.objectValue else { throw .badRequest("Not an object") }
    return object
  }
}
