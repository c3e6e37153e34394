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
    for name in seen {
      let path = Array(name.split(separator: " ").dropFirst().map(String.init))
      try checkWrapping(cli, path)
    }
    for command in [
      "wikilog replay", "wikilog wiki draft save", "wikilog wiki draft publish", "wikilog tail",
    ] {
      #expect(seen.contains(command), "\(command) is not listed")
    }
    #expect(seen.count > 30)
  }

  /// Help is wrapped at the terminal's width (80 columns when it is not a terminal), by
  /// ArgumentParser, at the last space that fits. So a paragraph must be one line in the source
  /// (lines joined with `\`) or made of lines that fit, and a preformatted line (an example,
  /// indented) must fit in 79 columns, or it is broken inside an argument.
  func checkWrapping(_ cli: CLI, _ path: [String]) throws {
    let name = (["wikilog"] + path).joined(separator: " ")
    let wide = try cli.run(path + ["--help"], environment: ["COLUMNS": "1000"]).stdout
    let lines = wide.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    guard let overview = lines.firstIndex(where: { $0.hasPrefix("OVERVIEW:") }),
      let usage = lines.firstIndex(where: { $0.hasPrefix("USAGE:") })
    else {
      Issue.record("\(name) --help has no OVERVIEW or USAGE")
      return
    }
    let text = Array(lines[(overview + 1)..<usage])
    for line in text where !line.hasPrefix(" ") {
      // ArgumentParser cannot break a word longer than the width: it breaks at the next space
      // instead, however far, and the next lines come out shifted.
      for word in line.split(separator: " ") where word.count > 79 {
        Issue.record("\(name) --help: a word longer than 79 columns: \(word)")
      }
    }
    for (i, line) in text.enumerated() where line.count > 79 {
      if line.hasPrefix(" ") {
        Issue.record("\(name) --help: a preformatted line longer than 79 columns: \(line)")
      } else if (i > 0 && !text[i - 1].isEmpty) || (i + 1 < text.count && !text[i + 1].isEmpty) {
        Issue.record("\(name) --help: a paragraph broken by hand into lines too long: \(line)")
      }
    }
    // And at 80 columns, every preformatted line comes out whole.
    let narrow = try cli.run(path + ["--help"], environment: ["COLUMNS": "80"]).stdout
    for line in text where line.hasPrefix("  ") {
      #expect(narrow.contains(line + "\n"), "\(name) --help at 80 columns breaks: \(line)")
    }
  }
}
