import Foundation
import TestSupport
import Testing

/// Damaged data files: every command ends with one `wikilog: error:` line (or succeeds where
/// the damage does not touch what it reads), never with a signal; `serve` keeps serving the
/// other databases.
@Suite struct DamageTests {
  enum Damage: String, CaseIterable, CustomStringConvertible {
    case truncatedToHalf, lastQuarterZeroed, pageOverwritten, bytesFlipped
    var description: String { rawValue }
  }

  /// A database of 400 documents (about 60 pages of 4 KB) in `wiki`.
  static func fixture(_ name: String = #function) throws -> CLI {
    let cli = try CLI(name)
    let docs = (0..<400).map {
      #"{"_id":"doc\#($0)","text":"\#(String(repeating: "x", count: 300 + $0 % 50))"}"#
    }
    try cli.ok(["bulk-docs"], stdin: #"{"docs":[\#(docs.joined(separator: ","))]}"#)
    return cli
  }

  /// Damages `file` as the issue describes: cut to half its size; its last quarter zeroed; one
  /// 4 KB page in the middle overwritten with random bytes; 16 bytes flipped at 20 places.
  static func damage(_ file: String, _ kind: Damage) throws {
    let handle = try FileHandle(forUpdating: URL(fileURLWithPath: file))
    defer { try? handle.close() }
    let size = Int(try handle.seekToEnd())
    var random = SplitMix64(seed: 20_240_601)
    func bytes(_ count: Int) -> Data {
      Data((0..<count).map { _ in UInt8.random(in: 0...255, using: &random) })
    }
    switch kind {
    case .truncatedToHalf:
      try handle.truncate(atOffset: UInt64(size / 2))
    case .lastQuarterZeroed:
      try handle.seek(toOffset: UInt64(size - size / 4))
      handle.write(Data(count: size / 4))
    case .pageOverwritten:
      try handle.seek(toOffset: UInt64(size / 4096 / 2 * 4096))
      handle.write(bytes(4096))
    case .bytesFlipped:
      for i in 0..<20 {
        let offset = 2 * 4096 + (size - 3 * 4096) / 20 * i + Int(random.next() % 2048)
        try handle.seek(toOffset: UInt64(offset))
        let old = try #require(try handle.read(upToCount: 16))
        try handle.seek(toOffset: UInt64(offset))
        handle.write(Data(old.map { ~$0 }))
      }
    }
  }

  /// 16 bytes flipped at `places` places past the meta pages, chosen by `seed`.
  static func flip(_ file: String, places: Int, seed: UInt64) throws {
    let handle = try FileHandle(forUpdating: URL(fileURLWithPath: file))
    defer { try? handle.close() }
    let size = Int(try handle.seekToEnd())
    var random = SplitMix64(seed: seed)
    for _ in 0..<places {
      let offset = 2 * 4096 + Int(random.next() % UInt64(size - 2 * 4096 - 16))
      try handle.seek(toOffset: UInt64(offset))
      let old = try #require(try handle.read(upToCount: 16))
      try handle.seek(toOffset: UInt64(offset))
      handle.write(Data(old.map { ~$0 }))
    }
  }

  /// Checks a run on a damaged file: no signal, and no crash turned into an error line by the
  /// CLI's handler (FatalSignal); a failure is one `wikilog: error:` line.
  @discardableResult
  static func expectNoCrash(
    _ r: Run, _ what: String, sourceLocation: SourceLocation = #_sourceLocation
  ) -> Run {
    #expect(!r.signaled, "\(what) died of a signal: \(r.stderr)", sourceLocation: sourceLocation)
    #expect(
      !r.stderr.contains("crashed the process"), "\(what) crashed: \(r.stderr)",
      sourceLocation: sourceLocation)
    if r.status != 0 {
      #expect(r.status == 1, "\(what): status \(r.status)", sourceLocation: sourceLocation)
      #expect(
        r.stderr.hasPrefix("wikilog: error: "), "\(what): \(r.stderr)",
        sourceLocation: sourceLocation)
      #expect(
        r.stderr.split(separator: "\n").count == 1, "\(what): one line: \(r.stderr)",
        sourceLocation: sourceLocation)
    }
    return r
  }

  static let commands: [[String]] = [["get", "doc7"], ["tail"], ["all-docs"], ["verify"]]

  @Test(
    "a damaged file: get, tail, all-docs and verify end in one error line, never a signal",
    arguments: Damage.allCases)
  func commandsOnDamage(_ kind: Damage) throws {
    let cli = try Self.fixture("commandsOnDamage\(kind)")
    let file = cli.path + "/wiki/data.mdb"
    try Self.damage(file, kind)
    for command in Self.commands {
      let r = Self.expectNoCrash(try cli.run(command), "\(kind): wikilog \(command[0])")
      switch kind {
      case .truncatedToHalf:
        // Caught at open, before LMDB maps the file.
        #expect(r.status == 1, "\(command[0])")
        #expect(r.stderr.contains(file + " is damaged: it is "), "\(r.stderr)")
        #expect(r.stderr.contains("restore it from a backup"), "\(r.stderr)")
      case .lastQuarterZeroed, .pageOverwritten, .bytesFlipped:
        // What a command reads may miss the damage; then it succeeds. verify reads every
        // page in use, and each of these damages hits pages in use in this fixture.
        if command[0] == "verify" {
          #expect(r.status == 1, "verify found nothing: \(r.stdout)")
          #expect(
            r.stderr.contains("is damaged") || r.stderr.contains("problem"), "\(r.stderr)")
        }
      }
    }
  }

  @Test(
    "16 bytes flipped at random places: all-docs, get, tail, stats and verify end normally or with one error line, never a crash",
    arguments: [20, 1], 0..<6 as Range<UInt64>)
  func randomFlips(_ places: Int, _ seed: UInt64) throws {
    let cli = try Self.fixture("randomFlips\(places)x\(seed)")
    let file = cli.path + "/wiki/data.mdb"
    // 20 places: the structure is hit, and the check at open refuses the file; 1 place: often
    // only records are, which then fail their checksums or decoding.
    try Self.flip(file, places: places, seed: 7_000 + seed)
    let commands = [
      ["all-docs"], ["all-docs", "--include-docs"], ["get", "doc7"], ["get", "doc399"], ["tail"],
      ["stats"], ["verify"],
    ]
    for command in commands {
      let r = Self.expectNoCrash(
        try cli.run(command),
        "\(places) places, seed \(seed): wikilog \(command.joined(separator: " "))")
      if r.stderr.contains(" is damaged: ") {
        // Refused at open: the check names the file and what is wrong with it.
        #expect(r.stderr.contains(file + " is damaged: "), "\(r.stderr)")
        #expect(r.stderr.contains("restore it from a backup"), "\(r.stderr)")
      }
    }
  }

  @Test(
    "an emptied data file: every command, init too, says it is damaged; stderr closed is no crash")
  func emptiedFile() throws {
    let cli = try Self.fixture()
    let file = cli.path + "/wiki/data.mdb"
    try Data().write(to: URL(fileURLWithPath: file))
    for command in Self.commands + [["init"], ["put", #"{"_id":"new"}"#, "--actor", "x"]] {
      let r = Self.expectNoCrash(try cli.run(command), "wikilog \(command[0])")
      #expect(r.status == 1, "\(command[0])")
      #expect(r.stderr.contains("is damaged: it is empty (0 bytes)"), "\(r.stderr)")
    }
    #expect(try FileManager.default.attributesOfItem(atPath: file)[.size] as? Int == 0)
    // An error with standard error closed: the status tells it, no trap.
    let r = try cli.runRedirected(["get", "x"], stderr: "/dev/full")
    #expect(!r.signaled && r.status == 1)
  }

  @Test("verify names the damaged file and page")
  func verifyNamesThePage() throws {
    let cli = try Self.fixture()
    let file = cli.path + "/wiki/data.mdb"
    try Self.damage(file, .lastQuarterZeroed)
    let r = try cli.fails(["verify"], "\(file) is damaged: ")
    #expect(r.stderr.contains("page "), "\(r.stderr)")
    #expect(r.stderr.contains("restore it from a backup"), "\(r.stderr)")
  }

  /// curl `url`: the HTTP status and the body.

  @Test("serve: a truncated database answers 500 database_damaged, the others are served")
  func serveWithOneDamaged() throws {
    let cli = try CLI()
    try cli.put(#"{"_id":"a","n":1}"#)
    try cli.ok(["init", "-d", "broken"])
    try cli.put(#"{"_id":"b","n":2}"#, ["-d", "broken"])
    let file = cli.path + "/broken/data.mdb"
    try Self.damage(file, .truncatedToHalf)
    let (server, base) = try ChildProcess.serve(cli.path)
    defer { server.kill() }
    let good = try curl([base + "/wiki/a"])
    #expect(good.status == 200, "\(good)")
    for path in ["/broken/b", "/broken", "/broken/_all_docs"] {
      let bad = try curl([base + path])
      #expect(bad.status == 500, "\(path): \(bad)")
      let body = try #require(
        try JSONSerialization.jsonObject(with: Data(bad.body.utf8)) as? [String: Any])
      #expect(body["error"] as? String == "database_damaged", "\(bad.body)")
      let reason = try #require(body["reason"] as? String)
      // What is wrong, without the file's path on the server.
      #expect(reason.hasPrefix("the database's data file is damaged: "), "\(reason)")
      #expect(!reason.contains(cli.path) && !reason.contains("\n"), "\(reason)")
      #expect(reason.contains("restore it from a backup"), "\(reason)")
    }
    #expect(try curl([base + "/wiki/a"]).status == 200)
    #expect(try curl([base + "/_all_dbs"]).status == 200)
    #expect(!server.waitForExit(timeout: 0.2), "the server stopped")
  }

  @Test(
    "serve: every kind of damage to one database leaves the server up and the others served",
    arguments: Damage.allCases)
  func serveSurvives(_ kind: Damage) throws {
    let cli = try Self.fixture()
    try cli.ok(["init", "-d", "good"])
    try cli.put(#"{"_id":"a","n":1}"#, ["-d", "good"])
    try Self.damage(cli.path + "/wiki/data.mdb", kind)
    let (server, base) = try ChildProcess.serve(cli.path)
    defer { server.kill() }
    // The server checks every page of a database when it first opens it.
    var statuses: [String: Int] = [:]
    for path in [
      "/wiki", "/wiki/_all_docs?include_docs=true", "/wiki/_changes", "/wiki/doc0", "/wiki/doc200",
    ] {
      statuses[path] = try curl([base + path]).status
    }
    #expect(server.process.isRunning, "\(kind): the server died: \(statuses)")
    let good = try curl([base + "/good/a"])
    #expect(good.status == 200, "\(kind): \(good)")
    #expect(server.process.isRunning, "\(kind): the server died")
    if kind != .bytesFlipped {
      // Damage to the structure: refused when the database opens.
      #expect(statuses["/wiki"] == 500, "\(kind): \(statuses)")
    }
  }
}
