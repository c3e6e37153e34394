import Foundation
import Testing

@Suite struct HelpTests {
  @Test("every command's --help has examples and exits 0")
  func examples() throws {
    let cli = try CLI(initialize: false)
    var pending: [[String]] = [[]]
    var seen: [String] = []
    while let path = pending.popLast() {
      let r = try cli.run(path + ["--help"])
      let name = (["wikilog"] + path).joined(separator: " ")
      seen.append(name)
      #expect(r.status == 0, "\(name) --help: \(r.stderr)")
      #expect(r.stdout.contains("Example"), "\(name) --help has no examples")
      // The subcommands listed under SUBCOMMANDS:, "  name   abstract", lowercase names.
      let entry = #/^  ([a-z][a-z0-9-]*)(\s|$)/#
      var inList = false
      for line in r.stdout.split(separator: "\n", omittingEmptySubsequences: false) {
        if line.hasPrefix("SUBCOMMANDS:") {
          inList = true
        } else if inList, let match = try entry.prefixMatch(in: String(line)) {
          let sub = path + [String(match.1)]
          #expect(sub.count <= 4 && !seen.contains((["wikilog"] + sub).joined(separator: " ")))
          if sub.count <= 4 { pending.append(sub) }
        } else if inList, !line.hasPrefix(" "), !line.isEmpty {
          inList = false
        }
      }
    }
    for command in [
      "wikilog replay", "wikilog wiki draft save", "wikilog wiki draft publish", "wikilog tail",
    ] {
      #expect(seen.contains(command), "\(command) is not listed")
    }
    #expect(seen.count > 30)
  }
}
