// Users in `_users`, password checks and session cookies.
import Auth
import Foundation
import Projections

let dir = FileManager.default.temporaryDirectory.appendingPathComponent("auth-\(UUID())").path
defer { try? FileManager.default.removeItem(atPath: dir) }
try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
let data = DataDirectory(path: dir, systemDatabases: [.users])
defer { data.closeAll() }
let users = try UserStore(data: data)
try users.add(name: "ann", password: "correct horse", actor: "admin")
let auth = Authenticator(
  users: users, sessions: SessionCookies(secret: "a secret of 32 bytes or more!!!"))
print(try auth.checkPassword(name: "ann", password: "correct horse") != nil)  // true
print(try auth.checkPassword(name: "ann", password: "wrong") != nil)  // false
