import Crypto
import Formats
public import Foundation

/// CouchDB's `AuthSession` cookie (couch_httpd_auth): the value is base64url (no padding) of
/// `NAME:TIME:HMAC`, TIME the issue time in seconds since 1970 as uppercase hex (Erlang's
/// `integer_to_list(T, 16)`), HMAC the raw HMAC-SHA256 (CouchDB 3.4's first `hash_algorithms`;
/// HMAC-SHA1 cookies are accepted too) of `NAME:TIME` keyed with the server secret followed by
/// the user's password salt — so a password change ends the user's sessions.
///
/// A cookie is valid while `now < TIME + timeout` (600 s by default); once less than 90% of the
/// timeout is left (CouchDB's `TimeLeft < Timeout * 0.9`) a request signed in with it gets a
/// fresh cookie (``Verified/needsRefresh``).
public struct SessionCookies: Sendable {
  /// The cookie's name.
  public static let name = "AuthSession"
  /// The server secret's bytes (its text as CouchDB uses it).
  let secret: [UInt8]
  /// Seconds a cookie is valid (`[chttpd_auth] timeout`).
  public var timeout: Int
  /// `Max-Age`/`Expires` on the cookie (`allow_persistent_cookies`, true by default).
  public var persistent = true
  /// `Domain=` (`cookie_domain`), when set.
  public var domain: String?
  /// `SameSite=` (`same_site`: `Lax`, `Strict` or `None`), when set.
  public var sameSite: String?

  public init(secret: String, timeout: Int = 600) {
    self.secret = Array(secret.utf8)
    self.timeout = timeout
  }

  /// A cookie verified: whose it is and whether a fresh one should be sent.
  public struct Verified: Sendable, Hashable {
    public var name: String
    /// Seconds until it expires.
    public var timeLeft: Int
    /// Less than 90% of the timeout is left: send a fresh cookie with the response.
    public var needsRefresh: Bool
  }

  /// The cookie value for user `name` with password salt `salt`, issued at `time`.
  public func value(name: String, salt: String, time: Date) -> String {
    let data = name + ":" + String(Int(time.timeIntervalSince1970), radix: 16, uppercase: true)
    let key = SymmetricKey(data: secret + Array(salt.utf8))
    let mac = Array(HMAC<SHA256>.authenticationCode(for: Array(data.utf8), using: key))
    return Base64.encodeURL(Array(data.utf8) + [UInt8(ascii: ":")] + mac)
  }

  /// The parts of a presented cookie value: name, time as written, MAC. A value that is not
  /// base64url of three `:`-separated parts is CouchDB's 400 "Malformed AuthSession cookie".
  public static func parse(_ value: String) throws(AuthError) -> (
    name: String, time: String, mac: [UInt8]
  ) {
    guard let bytes = Base64.decodeURL(value) else { throw malformed }
    let colon = UInt8(ascii: ":")
    guard let first = bytes.firstIndex(of: colon),
      let second = bytes[(first + 1)...].firstIndex(of: colon)
    else { throw malformed }
    return (
      String(decoding: bytes[..<first], as: UTF8.self),
      String(decoding: bytes[(first + 1)..<second], as: UTF8.self),
      Array(bytes[(second + 1)...])
    )
  }

  static let malformed = AuthError.badRequest(
    "Malformed AuthSession cookie. Please clear your cookies.")

  /// Checks a parsed cookie of user `name` (whose password salt is `salt`) at `now`: nil when
  /// its MAC is wrong or it has expired (CouchDB then treats the request as anonymous).
  public func verify(name: String, time: String, mac: [UInt8], salt: String, now: Date)
    -> Verified?
  {
    guard let issued = Int(time, radix: 16), issued >= 0, !time.hasPrefix("+"),
      !time.hasPrefix("-")
    else { return nil }
    let current = Int(now.timeIntervalSince1970)
    guard current < issued + timeout else { return nil }
    let data = Array((name + ":" + time).utf8)
    let key = SymmetricKey(data: secret + Array(salt.utf8))
    let valid =
      HMAC<SHA256>.isValidAuthenticationCode(mac, authenticating: data, using: key)
      || HMAC<Insecure.SHA1>.isValidAuthenticationCode(mac, authenticating: data, using: key)
    guard valid else { return nil }
    let left = issued + timeout - current
    return Verified(name: name, timeLeft: left, needsRefresh: Double(left) < Double(timeout) * 0.9)
  }

  /// The `Set-Cookie` header value CouchDB sends with a cookie `value` at `now`
  /// (mochiweb_cookies' format): `AuthSession=VALUE; Version=1; Expires=...; Max-Age=600;
  /// [Secure; ][Domain=...; ]Path=/; HttpOnly[; SameSite=...]`. `secure` when the request came
  /// over HTTPS.
  public func setCookie(value: String, secure: Bool = false, now: Date) -> String {
    var parts = [Self.name + "=" + value, "Version=1"]
    if persistent {
      parts.append("Expires=" + Self.cookieDate(now.addingTimeInterval(TimeInterval(timeout))))
      parts.append("Max-Age=\(timeout)")
    }
    if secure { parts.append("Secure") }
    if let domain { parts.append("Domain=" + domain) }
    parts.append("Path=/")
    parts.append("HttpOnly")
    if let sameSite { parts.append("SameSite=" + sameSite) }
    return parts.joined(separator: "; ")
  }

  /// The `Set-Cookie` value that ends a session (`DELETE /_session`, a failed sign-in): an
  /// empty `AuthSession` with the same attributes, as CouchDB sends it.
  public func clearCookie(secure: Bool = false, now: Date) -> String {
    setCookie(value: "", secure: secure, now: now)
  }

  /// `Wdy, DD Mon YYYY HH:MM:SS GMT`.
  static func cookieDate(_ date: Date) -> String {
    var calendar = Calendar(identifier: .gregorian)
    calendar.timeZone = TimeZone(identifier: "UTC")!
    let c = calendar.dateComponents(
      [.year, .month, .day, .hour, .minute, .second, .weekday], from: date)
    let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    let months = [
      "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ]
    func two(_ n: Int?) -> String { n.map { $0 < 10 ? "0\($0)" : "\($0)" } ?? "00" }
    return
      "\(days[(c.weekday ?? 1) - 1]), \(two(c.day)) \(months[(c.month ?? 1) - 1]) \(c.year ?? 1970) \(two(c.hour)):\(two(c.minute)):\(two(c.second)) GMT"
  }

  /// The value of the `AuthSession` cookie in a `Cookie` header (`a=1; AuthSession=...`), nil
  /// when there is none.
  public static func cookieValue(inHeader header: String) -> String? {
    // Byte by byte: this runs for every request that carries cookies.
    let bytes = Array(header.utf8)
    let key = Array(name.utf8)
    func isSpace(_ b: UInt8) -> Bool { b == 32 || b == 9 }
    var start = 0
    while start < bytes.count {
      var end = start
      while end < bytes.count && bytes[end] != UInt8(ascii: ";") { end += 1 }
      var a = start
      var z = end
      while a < z && isSpace(bytes[a]) { a += 1 }
      while z > a && isSpace(bytes[z - 1]) { z -= 1 }
      if let eq = bytes[a..<z].firstIndex(of: UInt8(ascii: "=")) {
        var k = eq
        while k > a && isSpace(bytes[k - 1]) { k -= 1 }
        if bytes[a..<k].elementsEqual(key) {
          var v = eq + 1
          while v < z && isSpace(bytes[v]) { v += 1 }
          if z - v >= 2 && bytes[v] == UInt8(ascii: "\"") && bytes[z - 1] == UInt8(ascii: "\"") {
            v += 1
            z -= 1
          }
          return String(decoding: bytes[v..<z], as: UTF8.self)
        }
      }
      start = end + 1
    }
    return nil
  }
}
