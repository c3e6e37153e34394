import Auth
import Formats
import Foundation
import JSON
import Synchronization

/// The `_config` settings of signing in that change at run time, as CouchDB names them:
/// `chttpd/authentication_handlers`, `[jwt_auth]` (`required_claims`, `allowed_algorithms`,
/// `roles_claim_name`, `roles_claim_path`) and the `[jwt_keys]` section (`hmac:KID`,
/// `rsa:KID`, `ec:KID`). Each applies to the server's ``Auth/Authenticator`` at once; a server
/// that signs no one in has none of them.
extension CouchServer {
  static let authSettings: [String: [String: Setting]] = [
    "chttpd": [
      "authentication_handlers": Setting(
        read: { server in
          server.options.authenticator.map { Self.handlersText($0.handlers) }
        },
        write: { server, text throws(CouchError) in
          let auth = try server.requireAuthenticator("chttpd/authentication_handlers")
          auth.handlers = try Self.handlers(parsing: text)
        }, initial: { _ in Self.handlersText(Authenticator.Handler.standard) })
    ],
    "chttpd_auth": [
      "proxy_use_secret": Setting(
        read: { $0.options.authenticator.map { String($0.proxy.usesSecret) } },
        write: { server, text throws(CouchError) in
          let auth = try server.requireAuthenticator("chttpd_auth/proxy_use_secret")
          guard let on = Bool(text.filter { $0 != " " }.lowercased()) else {
            throw .badRequest(
              "chttpd_auth/proxy_use_secret must be true or false, not \"\(text.prefix(40))\"")
          }
          auth.proxy.usesSecret = on
        }, initial: { _ in "false" }),
      // The proxy's secret only: wikilog's session cookies are signed with the server's own
      // secret (its secret file), which this does not change.
      "secret": Setting(
        read: { $0.options.authenticator?.proxy.secret },
        write: { server, text throws(CouchError) in
          let auth = try server.requireAuthenticator("chttpd_auth/secret")
          auth.proxy.secret = text.isEmpty ? nil : text
        }, initial: { _ in "" }),
    ],
    "chttpd_auth_lockout": [
      "mode": Setting(
        read: { $0.options.authenticator?.throttle.lockoutMode.rawValue },
        write: { server, text throws(CouchError) in
          let auth = try server.requireAuthenticator("chttpd_auth_lockout/mode")
          // As `couch_auth_lockout:lockout_mode/0`: anything else is off.
          auth.throttle.lockoutMode = SignInThrottle.LockoutMode(rawValue: text) ?? .off
        }, initial: { _ in SignInThrottle.LockoutMode.off.rawValue }),
      "threshold": Setting(read: {
        $0.options.authenticator.map { String($0.throttle.lockoutThreshold) }
      }),
    ],
    "jwt_auth": [
      "required_claims": jwtSetting(
        "required_claims",
        read: { verifier in
          (verifier.requiredClaims.sorted()
            + verifier.requiredClaimValues.sorted { $0.key < $1.key }.map {
              #"{\#($0.key), "\#($0.value)"}"#
            })
            .joined(separator: ", ")
        },
        write: { verifier, text throws(CouchError) in
          guard let (names, values) = JWTVerifier.requiredClaims(parsing: text) else {
            throw .badRequest(
              #"jwt_auth/required_claims must be claim names and {name, "value"} pairs, separated by commas"#
            )
          }
          verifier.requiredClaims = names
          verifier.requiredClaimValues = values
        }, initial: "exp"),
      "allowed_algorithms": jwtSetting(
        "allowed_algorithms",
        read: { $0.allowedAlgorithms.sorted().joined(separator: ", ") },
        write: { verifier, text throws(CouchError) in
          let names = Set(
            text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter {
              !$0.isEmpty
            })
          guard !names.isEmpty, names.isSubset(of: JWTVerifier.algorithms) else {
            throw .badRequest(
              "jwt_auth/allowed_algorithms must be some of \(JWTVerifier.algorithms.sorted().joined(separator: ", "))"
            )
          }
          verifier.allowedAlgorithms = names
        }, initial: "ES256, HS256, RS256"),
      "roles_claim_name": jwtSetting(
        "roles_claim_name", read: { $0.rolesClaim },
        write: { verifier, text throws(CouchError) in verifier.rolesClaim = text },
        initial: "_couchdb.roles"),
      "roles_claim_path": jwtSetting(
        "roles_claim_path",
        read: { verifier in
          verifier.rolesClaimPath.map {
            $0.map { $0.replacingOccurrences(of: ".", with: "\\.") }.joined(separator: ".")
          }
        },
        write: { verifier, text throws(CouchError) in
          verifier.rolesClaimPath = text.isEmpty ? nil : JWTVerifier.rolesClaimPath(parsing: text)
        }, initial: ""),
    ],
  ]

  /// A `[jwt_auth]` setting of the authenticator's JWT verifier.
  static func jwtSetting(
    _ key: String, read: @escaping @Sendable (JWTVerifier) -> String?,
    write: @escaping @Sendable (inout JWTVerifier, String) throws(CouchError) -> Void,
    initial: String
  ) -> Setting {
    Setting(
      read: { server in
        server.options.authenticator.flatMap { read($0.jwtSettings) }
      },
      write: { server, text throws(CouchError) in
        let auth = try server.requireAuthenticator("jwt_auth/\(key)")
        do {
          try auth.updateJWT { verifier in try write(&verifier, text) }
        } catch let error as CouchError {
          throw error
        } catch {
          throw .badRequest("jwt_auth/\(key): \(error)")
        }
      }, initial: { _ in initial })
  }

  func requireAuthenticator(_ name: String) throws(CouchError) -> Authenticator {
    guard let auth = options.authenticator else {
      throw .badRequest("\(name): this server signs no one in")
    }
    return auth
  }

  /// CouchDB's `authentication_handlers` text of `handlers`.
  static func handlersText(_ handlers: Set<Authenticator.Handler>) -> String {
    [Authenticator.Handler.jwt, .proxy, .cookie, .default].filter(handlers.contains).map {
      "{chttpd_auth, \($0.rawValue)_authentication_handler}"
    }.joined(separator: ", ")
  }

  /// The handlers a `chttpd/authentication_handlers` text names: `{Module, name}` pairs of
  /// `chttpd_auth` or `couch_httpd_auth`; one wikilog does not have is refused.
  static func handlers(parsing text: String) throws(CouchError) -> Set<Authenticator.Handler> {
    var handlers: Set<Authenticator.Handler> = []
    var rest = Substring(text)
    while let open = rest.firstIndex(of: "{") {
      guard let close = rest[open...].firstIndex(of: "}") else { break }
      let pair = rest[rest.index(after: open)..<close].split(separator: ",").map {
        $0.trimmingCharacters(in: .whitespaces)
      }
      rest = rest[rest.index(after: close)...]
      guard pair.count == 2, ["chttpd_auth", "couch_httpd_auth"].contains(pair[0]),
        pair[1].hasSuffix("_authentication_handler"),
        let handler = Authenticator.Handler(
          rawValue: String(pair[1].dropLast("_authentication_handler".count)))
      else {
        throw .badRequest(
          "chttpd/authentication_handlers: wikilog has no handler \(pair.joined(separator: ", ")); it has {chttpd_auth, jwt_authentication_handler}, {chttpd_auth, proxy_authentication_handler}, {chttpd_auth, cookie_authentication_handler} and {chttpd_auth, default_authentication_handler}"
        )
      }
      handlers.insert(handler)
    }
    guard !handlers.isEmpty else {
      throw .badRequest("chttpd/authentication_handlers names no handler")
    }
    return handlers
  }

  // MARK: [jwt_keys]

  /// The `[jwt_keys]` section as set at run time: `hmac:KID` (a base64 secret), `rsa:KID` and
  /// `ec:KID` (a public key in PEM, its line breaks written `\n`), by key.
  func jwtKeys() -> [(String, String)] {
    settings.current.jwtKeys.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
  }

  /// Sets `[jwt_keys] key = value`; returns the value it had.
  func setJWTKey(_ key: String, _ value: String) throws(CouchError) -> String? {
    let auth = try requireAuthenticator("jwt_keys/\(key)")
    let (type, kid) = try Self.jwtKeyName(key)
    do {
      try auth.updateJWT { verifier in
        switch type {
        case "hmac":
          guard let secret = Base64.decode(value), !secret.isEmpty else {
            throw CouchError.badRequest("jwt_keys/\(key) must be a base64 secret")
          }
          verifier.addHMACKey(secret, kid: kid)
        case "rsa":
          try verifier.addRSAKey(pem: value.replacingOccurrences(of: "\\n", with: "\n"), kid: kid)
        default:
          try verifier.addECKey(pem: value.replacingOccurrences(of: "\\n", with: "\n"), kid: kid)
        }
      }
    } catch let error as CouchError {
      throw error
    } catch {
      throw .badRequest("jwt_keys/\(key) is not a \(type.uppercased()) public key in PEM: \(error)")
    }
    return settings.update { values in
      defer { values.jwtKeys[key] = value }
      return values.jwtKeys[key]
    }
  }

  /// Removes `[jwt_keys] key`; returns the value it had, nil when it had none.
  func deleteJWTKey(_ key: String) throws(CouchError) -> String? {
    let auth = try requireAuthenticator("jwt_keys/\(key)")
    let (type, kid) = try Self.jwtKeyName(key)
    guard let old = settings.update({ $0.jwtKeys.removeValue(forKey: key) }) else { return nil }
    auth.updateJWT { $0.removeKey(type: type, kid: kid) }
    return old
  }

  /// `hmac:KID`, `rsa:KID` or `ec:KID`, split.
  static func jwtKeyName(_ key: String) throws(CouchError) -> (type: String, kid: String) {
    let parts = key.split(separator: ":", maxSplits: 1).map(String.init)
    guard parts.count == 2, ["hmac", "rsa", "ec"].contains(parts[0]), !parts[1].isEmpty else {
      throw .badRequest("a jwt_keys key is hmac:KID, rsa:KID or ec:KID, not \(key.prefix(40))")
    }
    return (parts[0], parts[1])
  }
}
