import CouchAPI
import CouchTestSupport
import Foundation
import HTTPTypes
import JSON
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// Design functions written by a database's admin who is not a server administrator (carol,
/// named in the database's `_security` admins) reach nothing but their arguments and CouchDB's
/// helpers: every escape is checked from outside the function (the file not created, the
/// socket not connected to, the server's environment not in any answer).
@Suite struct SandboxTests {
  /// A loopback socket listening, to see whether anything connected to it.
  final class Listener: Sendable {
    let fd: Int32
    let port: Int

    init() throws {
      let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
      var address = sockaddr_in()
      address.sin_family = sa_family_t(AF_INET)
      address.sin_addr.s_addr = inet_addr("127.0.0.1")
      address.sin_port = 0
      let bound = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
          bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
      }
      guard bound == 0, listen(fd, 16) == 0 else { throw POSIXError(.EADDRINUSE) }
      var length = socklen_t(MemoryLayout<sockaddr_in>.size)
      _ = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
      }
      _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
      self.fd = fd
      port = Int(UInt16(bigEndian: address.sin_port))
    }

    /// Whether a connection is waiting (nothing blocks: the socket is non-blocking).
    var wasConnected: Bool {
      let client = accept(fd, nil, nil)
      if client >= 0 { close(client) }
      return client >= 0
    }

    deinit { close(fd) }
  }

  /// JavaScript that tries every way out it knows, collecting what happened in `out`.
  static func attempts(file: String, port: Int) -> String {
    #"""
    var out = [];
    function attempt(name, f) {
      try { out.push(name + ':' + String(f())); } catch (e) { out.push(name + '!' + String(e)); }
    }
    attempt('process', function () { return typeof process; });
    attempt('through a helper', function () {
      return emit.constructor.constructor('return process')().pid; });
    attempt('through log', function () {
      return log.constructor('return this')().process.mainModule; });
    attempt('through an error', function () {
      try { null.x; } catch (e) { return e.constructor.constructor('return process')().pid; } });
    attempt('through this', function () { return this.process.env; });
    attempt('spawn', function () {
      return process.getBuiltinModule('child_process').execSync('touch \#(file)'); });
    attempt('require a host module', function () {
      return require('child_process').execSync('touch \#(file)'); });
    attempt('read a file', function () { return require('fs').readFileSync('/etc/passwd', 'utf8'); });
    attempt('os', function () { return os.open('\#(file)', os.O_CREAT | os.O_WRONLY); });
    attempt('std', function () { return std.open('\#(file)', 'w'); });
    attempt('environment', function () { return JSON.stringify(process.env); });
    attempt('socket', function () { return require('net').connect(\#(port), '127.0.0.1'); });
    attempt('fetch', function () { return fetch('http://127.0.0.1:\#(port)/'); });
    attempt('XMLHttpRequest', function () { return new XMLHttpRequest(); });
    attempt('WebSocket', function () { return new WebSocket('ws://127.0.0.1:\#(port)/'); });
    attempt('timer', function () { return setTimeout(function () {}, 0); });
    attempt('interval', function () { return setInterval(function () {}, 1); });
    attempt('import', function () { return import('fs'); });
    attempt('WebAssembly', function () { return typeof WebAssembly; });
    attempt('globals', function () { return Object.getOwnPropertyNames(globalThis).join(' '); });
    """#
  }

  /// The design document with every kind of function trying every way out.
  static func hostile(file: String, port: Int) -> String {
    let body = attempts(file: file, port: port)
    func js(_ text: String) -> String {
      String(decoding: JSONValue.string(text).serialized(), as: UTF8.self)
    }
    return #"""
      {"views": {
         "lib": {"probe": \#(js("exports.run = function () {\n" + body + "\nreturn out; };"))},
         "escape": {"map": \#(js("function (doc) {\n" + body + "\nemit(doc._id, out); }")),
                    "reduce": \#(js("function (keys, values, rereduce) {\n" + body + "\nreturn out; }"))},
         "lib_escape": {"map": "function (doc) { emit(doc._id, require('views/lib/probe').run()); }"}},
       "shows": {"s": \#(js("function (doc, req) {\n" + body + "\nreturn out.join('\\n'); }"))},
       "lists": {"l": \#(js("function (head, req) {\n" + body + "\nsend(out.join('\\n')); }"))},
       "updates": {"u": \#(js("function (doc, req) {\n" + body + "\nreturn [null, out.join('\\n')]; }"))},
       "filters": {"f": \#(js("function (doc, req) {\n" + body + "\nreturn true; }"))},
       "validate_doc_update": \#(js("function (doc, old, user) {\n" + body + "\nif (doc.probe) throw({forbidden: out.join('\\n')}); }"))}
      """#
  }

  @Test("every function kind, as a database admin who is not a server admin: no escape")
  func noEscape() async throws {
    // A value of the server's own environment (never set here: setenv races other threads'
    // reads of the environment, such as a child process being started).
    let secret = try #require(ProcessInfo.processInfo.environment["PATH"])
    let listener = try Listener()
    try await withAccessServer { client, fixture in
      let file = fixture.dir.path + "/escaped"
      let admin = AccessFixture.basic("admin")
      let carol = AccessFixture.basic("carol")
      #expect(try await client.call(.put, "/lab", headers: admin).code == 201)
      #expect(
        try await client.call(
          .put, "/lab/_security",
          #"{"admins":{"names":["carol"]},"members":{"names":["carol","bob"]}}"#, headers: admin
        ).code == 200)
      let saved = try await client.call(
        .put, "/lab/_design/evil", Self.hostile(file: file, port: listener.port), headers: carol)
      #expect(saved.code == 201, "\(saved.text)")
      // A member's plain write runs validate_doc_update.
      let bob = AccessFixture.basic("bob")
      #expect(try await client.call(.put, "/lab/a", #"{"n":1}"#, headers: bob).code == 201)
      let refused = try await client.call(.put, "/lab/b", #"{"probe":true}"#, headers: bob)
      #expect(refused.code == 403)
      var answers = [refused.text]
      for path in [
        "/lab/_design/evil/_view/escape?reduce=false", "/lab/_design/evil/_view/escape",
        "/lab/_design/evil/_view/lib_escape", "/lab/_design/evil/_show/s/a",
        "/lab/_design/evil/_list/l/escape?reduce=false",
        "/lab/_changes?filter=evil/f",
      ] {
        let answer = try await client.call(.get, path, headers: bob)
        #expect(answer.code == 200, "\(path): \(answer.text)")
        answers.append(answer.text)
      }
      let updated = try await client.call(.post, "/lab/_design/evil/_update/u", "{}", headers: bob)
      #expect(updated.code == 200 || updated.code == 201, "\(updated.text)")
      answers.append(updated.text)
      let all = answers.joined(separator: "\n")
      // The functions ran, and every attempt failed inside the sandbox.
      #expect(all.contains("process:undefined"))
      #expect(all.contains("spawn!"))
      #expect(all.contains("timer!"))
      #expect(all.contains("WebAssembly:undefined"))
      #expect(!all.contains("root:x:0:0"))
      #expect(!all.contains(secret))
      #expect(!all.contains("through a helper:"))
      #expect(!all.contains("through an error:"))
      #expect(!all.contains("socket:"))
      // Checked from outside: nothing was created, nothing connected.
      #expect(!FileManager.default.fileExists(atPath: file))
      #expect(!listener.wasConnected)
    }
  }

  @Test("a builtin changed by one design document is unchanged in another's functions")
  func realmsApart() async throws {
    try await withAccessServer { client, _ in
      let admin = AccessFixture.basic("admin")
      #expect(try await client.call(.put, "/lab", headers: admin).code == 201)
      let polluter = #"""
        {"shows": {"p": "function (doc, req) { Array.prototype.polluted = 'yes'; Object.prototype.evil = 'yes'; JSON.stringify = function () { return '\"hijacked\"'; }; globalThis.shared = 'leak'; return 'done'; }"},
         "views": {"v": {"map": "function (doc) { Object.prototype.inMap = 'yes'; emit(doc._id, null); }"}}}
        """#
      let victim = #"""
        {"shows": {"q": "function (doc, req) { return [typeof [].polluted, typeof ({}).evil, typeof ({}).inMap, typeof shared, JSON.stringify({a: 1})].join(' '); }"},
         "views": {"w": {"map": "function (doc) { emit([typeof [].polluted, typeof ({}).inMap], null); }"}}}
        """#
      #expect(try await client.call(.put, "/lab/_design/a", polluter, headers: admin).code == 201)
      #expect(try await client.call(.put, "/lab/_design/b", victim, headers: admin).code == 201)
      #expect(try await client.call(.put, "/lab/doc", "{}", headers: admin).code == 201)
      #expect(try await client.call(.get, "/lab/_design/a/_show/p", headers: admin).text == "done")
      _ = try await client.call(.get, "/lab/_design/a/_view/v", headers: admin)
      let shown = try await client.call(.get, "/lab/_design/b/_show/q", headers: admin)
      #expect(shown.text == #"undefined undefined undefined undefined {"a":1}"#)
      let rows = try await client.call(.get, "/lab/_design/b/_view/w", headers: admin)
      #expect(rows["rows"]?.arrayValue?.first?["key"] == json(#"["undefined","undefined"]"#))
      // The polluter's own later calls still answer (its realm is its own).
      #expect(try await client.call(.get, "/lab/_design/a/_show/p", headers: admin).code == 200)
    }
  }

  @Test("a design document that arrived by replication runs in the same sandbox")
  func replicatedDesignDocument() async throws {
    let listener = try Listener()
    try await withAccessServer { client, fixture in
      let file = fixture.dir.path + "/escaped-replicated"
      let admin = AccessFixture.basic("admin")
      #expect(try await client.call(.put, "/lab", headers: admin).code == 201)
      // As a replicator writes it: its revision given, not made here.
      let ddoc =
        #"{"_id":"_design/replicated","_rev":"1-0123456789abcdef0123456789abcdef","#
        + Self.hostile(file: file, port: listener.port).drop { $0 != "{" }.dropFirst()
      let written = try await client.call(
        .post, "/lab/_bulk_docs", #"{"new_edits":false,"docs":["# + ddoc + "]}",
        headers: admin)
      #expect(written.code == 201, "\(written.text)")
      #expect(try await client.call(.put, "/lab/a", "{}", headers: admin).code == 201)
      let shown = try await client.call(.get, "/lab/_design/replicated/_show/s/a", headers: admin)
      #expect(shown.code == 200 && shown.text.contains("process:undefined"))
      let view = try await client.call(
        .get, "/lab/_design/replicated/_view/escape?reduce=false", headers: admin)
      #expect(view.code == 200 && view.text.contains("spawn!"))
      #expect(!FileManager.default.fileExists(atPath: file))
      #expect(!listener.wasConnected)
    }
  }

  @Test("getRow outside a list reads no other command (another database's write, say)")
  func noReadingOtherCommands() async throws {
    try await withAccessServer { client, _ in
      let admin = AccessFixture.basic("admin")
      for db in ["lab", "other"] {
        #expect(try await client.call(.put, "/\(db)", headers: admin).code == 201)
      }
      // What getRow gave (or why it gave nothing) comes back as the refusal's reason, in the
      // same call: no state kept between calls, which may go to different processes.
      let reader = #"""
        {"validate_doc_update": "function (doc) { if (!doc.probe) return; var r; try { r = 'read: ' + JSON.stringify(getRow()); } catch (e) { r = 'refused: ' + e.message; } throw({forbidden: r}); }"}
        """#
      let other = #"{"validate_doc_update": "function (doc) { }"}"#
      #expect(
        try await client.call(.put, "/lab/_design/reader", reader, headers: admin).code == 201)
      #expect(try await client.call(.put, "/other/_design/v", other, headers: admin).code == 201)
      for (i, db) in ["lab", "other", "lab"].enumerated() {
        let body = db == "lab" ? #"{"probe":true}"# : #"{"text":"other database's secret"}"#
        let answer = try await client.call(.put, "/\(db)/d\(i)", body, headers: admin)
        if db == "lab" {
          #expect(answer.code == 403, "\(answer.text)")
          #expect(
            answer["reason"]?.stringValue?.hasPrefix("refused: getRow outside a list") == true,
            "\(answer.text)")
          #expect(!answer.text.contains("secret"))
        } else {
          #expect(answer.code == 201)
        }
      }
    }
  }

  @Test("a function that allocates without end fails, and the next call works")
  func memoryBounded() async throws {
    try await withAccessServer { client, _ in
      let admin = AccessFixture.basic("admin")
      #expect(try await client.call(.put, "/lab", headers: admin).code == 201)
      let greedy = #"""
        {"shows": {"grow": "function (doc, req) { var all = []; for (;;) all.push(new Array(1000000).fill('x' + all.length)); }",
                   "ok": "function (doc, req) { return 'fine'; }"}}
        """#
      #expect(try await client.call(.put, "/lab/_design/g", greedy, headers: admin).code == 201)
      let grown = try await client.call(.get, "/lab/_design/g/_show/grow", headers: admin)
      #expect(grown.code == 500)
      #expect(try await client.call(.get, "/lab/_design/g/_show/ok", headers: admin).text == "fine")
    }
  }
}
