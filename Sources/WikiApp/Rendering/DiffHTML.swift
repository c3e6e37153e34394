import Wiki

/// Two revisions' Markdown compared, as HTML tables the compare page shows: inline (one column,
/// each line marked `+`, `−` or unchanged) or side by side (the old text on the left, the new
/// on the right). Additions are `<ins>` and deletions `<del>` inside rows marked with a sign, so
/// they read without colour; a changed line paired with the line it replaces marks the words
/// that changed (``WordDiff``). Unchanged stretches longer than the context are cut, with a row
/// saying how many lines are hidden. Every text is HTML-escaped.
struct DiffHTML {
  let diff: LineDiff
  let context: Int

  init(old: String, new: String, context: Int = 3) {
    diff = LineDiff(old: old, new: new)
    self.context = context
  }

  /// One row: a line of the old text, of the new, or of both.
  enum Row {
    case same(old: Int, new: Int, text: String)
    case deleted(old: Int, text: String, pair: String?)
    case inserted(new: Int, text: String, pair: String?)
    case gap(Int)
  }

  /// The rows of the hunks, a gap between them (and before the first, after the last).
  var rows: [Row] {
    var rows: [Row] = []
    var oldLine = 0
    let hunks = diff.hunks(context: context)
    for hunk in hunks {
      if hunk.oldRange.lowerBound > oldLine {
        rows.append(.gap(hunk.oldRange.lowerBound - oldLine))
      }
      var index = 0
      while index < hunk.edits.count {
        let edit = hunk.edits[index]
        switch edit.operation {
        case .equal:
          for (k, line) in edit.lines.enumerated() {
            rows.append(
              .same(
                old: edit.oldRange.lowerBound + k, new: edit.newRange.lowerBound + k, text: line))
          }
        case .delete:
          // A deletion followed by an insertion: line k of one pairs with line k of the other.
          let next = index + 1 < hunk.edits.count ? hunk.edits[index + 1] : nil
          let inserted = next?.operation == .insert ? next!.lines : []
          for (k, line) in edit.lines.enumerated() {
            rows.append(
              .deleted(
                old: edit.oldRange.lowerBound + k, text: line,
                pair: k < inserted.count ? inserted[k] : nil))
          }
          if let next, next.operation == .insert {
            for (k, line) in next.lines.enumerated() {
              rows.append(
                .inserted(
                  new: next.newRange.lowerBound + k, text: line,
                  pair: k < edit.lines.count ? edit.lines[k] : nil))
            }
            index += 1
          }
        case .insert:
          for (k, line) in edit.lines.enumerated() {
            rows.append(.inserted(new: edit.newRange.lowerBound + k, text: line, pair: nil))
          }
        }
        index += 1
      }
      oldLine = hunk.oldRange.upperBound
    }
    let oldCount = diff.edits.reduce(0) { $0 + ($1.operation == .insert ? 0 : $1.lines.count) }
    if !hunks.isEmpty, oldCount > oldLine { rows.append(.gap(oldCount - oldLine)) }
    return rows
  }

  /// `text` (one line, its `\n` dropped) escaped, with the words `pair` does not have marked
  /// by `tag` (`ins` or `del`).
  static func marked(_ text: String, pair: String?, tag: String) -> String {
    guard let pair else { return escape(line(text)) }
    let words =
      tag == "del" ? WordDiff(old: text, new: pair).old : WordDiff(old: pair, new: text).new
    return words.map {
      $0.changed
        ? "<\(tag) class=\"word\">\(escape($0.text))</\(tag)>" : escape($0.text)
    }.joined()
  }

  static func line(_ text: String) -> String {
    text.hasSuffix("\n") ? String(text.dropLast()) : text
  }

  static func escape(_ text: String) -> String { WikiSite.escape(text) }

  static func hidden(_ n: Int) -> String {
    "⋯ \(WikiSite.count(n, "unchanged line")) ⋯"
  }

  /// The inline table: sign, old number, new number, text.
  var inline: String {
    var out =
      "<table class=\"diff-table inline\" id=\"diff\"><colgroup><col class=\"c-sign\"><col class=\"c-num\"><col class=\"c-num\"><col></colgroup><thead><tr><th scope=\"col\"><span class=\"visually-hidden\">Change</span></th><th scope=\"col\">Old</th><th scope=\"col\">New</th><th scope=\"col\">Text</th></tr></thead><tbody>"
    for row in rows {
      switch row {
      case .same(let o, let n, let text):
        out +=
          "<tr class=\"same\"><td class=\"sign\"></td><td class=\"num\">\(o + 1)</td><td class=\"num\">\(n + 1)</td><td class=\"text\"><code>\(Self.escape(Self.line(text)))</code></td></tr>"
      case .deleted(let o, let text, let pair):
        out +=
          "<tr class=\"del\"><td class=\"sign\" aria-label=\"deleted\">−</td><td class=\"num\">\(o + 1)</td><td class=\"num\"></td><td class=\"text\"><del><code>\(Self.marked(text, pair: pair, tag: "del"))</code></del></td></tr>"
      case .inserted(let n, let text, let pair):
        out +=
          "<tr class=\"ins\"><td class=\"sign\" aria-label=\"added\">+</td><td class=\"num\"></td><td class=\"num\">\(n + 1)</td><td class=\"text\"><ins><code>\(Self.marked(text, pair: pair, tag: "ins"))</code></ins></td></tr>"
      case .gap(let n):
        out += "<tr class=\"gap\"><td colspan=\"4\">\(Self.hidden(n))</td></tr>"
      }
    }
    return out + "</tbody></table>"
  }

  /// The side-by-side table: the old line (number, sign, text) beside the new one.
  var sideBySide: String {
    var out =
      "<table class=\"diff-table side\" id=\"diff\"><colgroup><col class=\"c-num\"><col class=\"c-sign\"><col><col class=\"c-num\"><col class=\"c-sign\"><col></colgroup><thead><tr><th scope=\"col\" colspan=\"3\">Old</th><th scope=\"col\" colspan=\"3\">New</th></tr></thead><tbody>"
    // One side's three cells: a changed line marked with its tag (`del` or `ins`), its sign
    // and the sign's name; nothing for a line the other side has alone.
    func cells(_ n: Int?, _ html: String?, changed: Bool, tag: String, sign: String, label: String)
      -> String
    {
      guard let n, let html else {
        return "<td class=\"num\"></td><td class=\"sign\"></td><td class=\"text empty\"></td>"
      }
      return changed
        ? "<td class=\"num\">\(n + 1)</td><td class=\"sign \(tag)\" aria-label=\"\(label)\">\(sign)</td><td class=\"text \(tag)\"><\(tag)><code>\(html)</code></\(tag)></td>"
        : "<td class=\"num\">\(n + 1)</td><td class=\"sign\"></td><td class=\"text\"><code>\(html)</code></td>"
    }
    func oldCells(_ n: Int?, _ html: String?, deleted: Bool) -> String {
      cells(n, html, changed: deleted, tag: "del", sign: "−", label: "deleted")
    }
    func newCells(_ n: Int?, _ html: String?, inserted: Bool) -> String {
      cells(n, html, changed: inserted, tag: "ins", sign: "+", label: "added")
    }
    let all = rows
    var i = 0
    while i < all.count {
      switch all[i] {
      case .same(let o, let n, let text):
        let html = Self.escape(Self.line(text))
        out +=
          "<tr class=\"same\">\(oldCells(o, html, deleted: false))\(newCells(n, html, inserted: false))</tr>"
        i += 1
      case .gap(let n):
        out += "<tr class=\"gap\"><td colspan=\"6\">\(Self.hidden(n))</td></tr>"
        i += 1
      case .deleted, .inserted:
        // A block of deletions then insertions: side by side, line for line.
        var deleted: [(Int, String, String?)] = []
        var inserted: [(Int, String, String?)] = []
        while i < all.count, case .deleted(let o, let text, let pair) = all[i] {
          deleted.append((o, text, pair))
          i += 1
        }
        while i < all.count, case .inserted(let n, let text, let pair) = all[i] {
          inserted.append((n, text, pair))
          i += 1
        }
        for k in 0..<max(deleted.count, inserted.count) {
          let d = k < deleted.count ? deleted[k] : nil
          let a = k < inserted.count ? inserted[k] : nil
          out +=
            "<tr class=\"change\">"
            + oldCells(
              d?.0, d.map { Self.marked($0.1, pair: $0.2, tag: "del") }, deleted: true)
            + newCells(
              a?.0, a.map { Self.marked($0.1, pair: $0.2, tag: "ins") }, inserted: true)
            + "</tr>"
        }
      }
    }
    return out + "</tbody></table>"
  }
}
