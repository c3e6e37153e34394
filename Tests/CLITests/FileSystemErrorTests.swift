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
}
