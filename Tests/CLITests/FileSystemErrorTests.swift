import Foundation
import Testing

/// The command line says what is actually wrong with a data directory or an argument.
@Suite struct FileSystemErrorTests {
  @Test func aRegularFileAsTheDataDirectory() throws {
    let cli = try CLI()
    let file = cli.path + "/plain-file"
    try Data("x".utf8).write(to: URL(fileURLWithPath: file))
    try cli.fails(["--db", file, "get", "doc"], "\(file) is a file, not a data directory")
    try cli.fails(["--db", file, "init"], "\(file) is a file, not a directory")
    try cli.fails(["--db", file + "/below/it", "init"], "\(file) is a file, not a directory")
    let r = try cli.run(["--db", file, "init"])
    #expect(!r.stderr.contains("NSCocoaErrorDomain"))
    #expect(!r.stderr.contains("internal_server_error"))
  }

  @Test func aNegativeLimitIsNamedAsSuch() throws {
    let cli = try CLI()
    for command in [["tail"], ["log", "tail"], ["audit"]] {
      let r = try cli.run(command + ["--limit", "-1"])
      #expect(r.status != 0)
      #expect(!r.stderr.contains("Missing value"), "\(command): \(r.stderr)")
    }
    try cli.fails(["tail", "--limit", "-1"], status: 64, "--limit must be 0 or more")
  }

  @Test("a full standard output (/dev/full) is an error with status 1, not a quiet success")
  func fullStandardOutput() throws {
    let cli = try CLI()
    try cli.put(#"{"_id":"doc","text":"x"}"#)
    for arguments in [["export"], ["tail", "--since", "0"], ["get", "doc"], ["stats"]] {
      let r = try cli.runRedirected(arguments, stdout: "/dev/full")
      #expect(r.status == 1, "\(arguments)")
      #expect(r.stderr.contains("cannot write to standard output"), "\(arguments): \(r.stderr)")
    }
  }

  @Test("an empty --db or backup directory is a usage error, never the file system's root")
  func emptyPaths() throws {
    let cli = try CLI()
    for arguments in [
      ["--db", "", "init"], ["--db", "", "get", "x"], ["backup", ""], ["restore", ""],
    ] {
      let r = try cli.run(arguments)
      #expect(r.status == 64, "\(arguments): \(r.stderr)")
      #expect(r.stderr.contains("empty"), "\(arguments): \(r.stderr)")
    }
    #expect(!FileManager.default.fileExists(atPath: "/wiki"))
  }

  @Test("standard input past 64 MiB is refused before it is parsed, and writes nothing")
  func oversizedStandardInput() throws {
    let cli = try CLI()
    // From a file: the command stops reading at the limit, so a pipe's writer would get EPIPE.
    let input = cli.path + "/big.json"
    try Data(("[" + String(repeating: "1,", count: 33 << 20) + "1]").utf8).write(
      to: URL(fileURLWithPath: input))
    let r = try cli.runRedirected(["put", "--actor", "x"], stdin: input)
    #expect(r.status == 1)
    #expect(r.stderr.contains("larger than 64 MiB"), "\(r.stderr)")
    #expect(try cli.ok(["all-docs"]).stdout.contains(#""total_rows":0"#))
  }
}
