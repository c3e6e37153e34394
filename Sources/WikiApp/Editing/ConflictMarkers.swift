/// A text with diff3 conflict markers (what `Drafts.publish` answers when a draft and the page
/// changed the same lines): the settled parts and the hunks still to choose, each with the
/// draft's lines ("mine"), the base's and the page's ("theirs").
///
/// ```
/// <<<<<<< draft        ← mine
/// ||||||| base         ← base (optional)
/// =======              ← theirs
/// >>>>>>> 4-43bd…
/// ```
struct ConflictMarkers {
  enum Segment: Equatable {
    case settled(String)
    case hunk(mine: String, base: String?, theirs: String)
  }

  let segments: [Segment]

  /// nil when `text` has no complete hunk.
  init?(_ text: String) {
    var segments: [Segment] = []
    var settled: [Substring] = []
    var mine: [Substring] = []
    var base: [Substring]? = nil
    var theirs: [Substring] = []
    enum Part { case outside, mine, base, theirs }
    var part = Part.outside
    var pending: [Substring] = []  // a hunk's lines as written, should it never close
    let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
    func join(_ lines: [Substring]) -> String { lines.joined(separator: "\n") }
    for line in lines {
      switch part {
      case .outside:
        if line.hasPrefix("<<<<<<<") {
          part = .mine
          pending = [line]
          mine = []
          base = nil
          theirs = []
        } else {
          settled.append(line)
        }
      case .mine, .base:
        pending.append(line)
        if line.hasPrefix("|||||||"), part == .mine {
          part = .base
          base = []
        } else if line == "=======" {
          part = .theirs
        } else if part == .mine {
          mine.append(line)
        } else {
          base?.append(line)
        }
      case .theirs:
        pending.append(line)
        if line.hasPrefix(">>>>>>>") {
          if !settled.isEmpty { segments.append(.settled(join(settled))) }
          settled = []
          segments.append(.hunk(mine: join(mine), base: base.map(join), theirs: join(theirs)))
          part = .outside
        } else {
          theirs.append(line)
        }
      }
    }
    if part != .outside { settled.append(contentsOf: pending) }
    if !settled.isEmpty { segments.append(.settled(join(settled))) }
    guard segments.contains(where: { if case .hunk = $0 { true } else { false } }) else {
      return nil
    }
    self.segments = segments
  }

  /// Whether `text` still has a line that is a conflict marker: such a text is not published.
  static func remain(in text: String) -> Bool {
    text.split(separator: "\n", omittingEmptySubsequences: false).contains { line in
      line.hasPrefix("<<<<<<<") || line.hasPrefix(">>>>>>>") || line.hasPrefix("|||||||")
        || line == "======="
    }
  }

  /// The preview of a text with hunks: settled parts rendered by `render`, each hunk as its
  /// three versions side by side with a choice of each (the editor's script rewrites the text).
  func html(render: (String) throws -> String) rethrows -> String {
    var out = #"<div class="conflicts" role="group" aria-label="Changes to settle">"#
    var number = 0
    for segment in segments {
      switch segment {
      case .settled(let text):
        out += try render(text)
      case .hunk(let mine, let base, let theirs):
        number += 1
        out +=
          #"<div class="hunk" data-hunk="\#(number)"><p class="hunk-title">Change \#(number): "#
        out += "both you and someone else changed these lines. Keep which?</p>"
        out += #"<div class="hunk-sides">"#
        func side(_ name: String, _ label: String, _ text: String) {
          out += #"<div class="hunk-side \#(name)"><p class="meta">\#(label)</p><pre>"#
          out += WikiSite.escape(text.isEmpty ? "(nothing)" : text)
          out += #"</pre><button type="button" class="choose" data-hunk="\#(number)" "#
          out +=
            #"data-choice="\#(name)">Keep \#(name == "base" ? "the original" : name)</button></div>"#
        }
        side("mine", "Your draft", mine)
        if let base { side("base", "Before either change", base) }
        side("theirs", "The page now", theirs)
        out += "</div></div>"
      }
    }
    return out + "</div>"
  }
}
