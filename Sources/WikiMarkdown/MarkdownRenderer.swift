/// Where a `[[wiki link]]` goes: the href to use and whether the page exists.
public struct WikiLinkTarget: Sendable, Hashable {
  /// The link's href, used as given (HTML-escaped in the output), unless it is a `javascript:`,
  /// `vbscript:`, `file:` or non-image `data:` URL, which is left out like cmark leaves out such
  /// URLs.
  public var href: String
  /// Whether the page exists; a missing page's link is drawn as a link to create it.
  public var exists: Bool

  public init(href: String, exists: Bool) {
    self.href = href
    self.exists = exists
  }
}

/// Renders a wiki page's Markdown to HTML with GitHub Flavored Markdown.
///
/// The Markdown is parsed by cmark-gfm with the table, strikethrough, autolink, tasklist and
/// tagfilter extensions, in cmark's safe mode: raw HTML is omitted and links and images to
/// `javascript:`, `vbscript:`, `file:` and non-image `data:` URLs lose their URL. Smart
/// punctuation is off.
///
/// `[[Page Name]]` and `[[Page Name|label]]` become links, by the rules of the wiki's backlinks
/// index: on one line, the target is the text before the first `|` trimmed of Unicode
/// whitespace, empty targets are not links, `[[[A]]]` links to `A`, and an opening that meets
/// another `[[` before its `]]` is abandoned for the later one. They are found in the parsed
/// text, so links in code spans, code blocks, raw HTML, link texts and image descriptions stay
/// as written, and so does a link whose brackets or target the Markdown spells differently
/// from the source (`&#91;&#91;A]]`, `[[A&amp;B]]`, `[[A *b*]]`): only targets the backlinks
/// index also finds in the source are drawn. In a table a `|` ends the cell, so a link there
/// cannot have a label.
///
/// ```swift
/// MarkdownRenderer().render("See [[Home]].") { WikiLinkTarget(href: "/wiki/\($0)", exists: true) }
/// // <p>See <a href="/wiki/Home" class="wikilink">Home</a>.</p>
/// ```
public struct MarkdownRenderer: Sendable {
  public init() {}

  /// HTML for `markdown`. `link` resolves each [[wiki link]] target (the page title as written,
  /// trimmed of surrounding whitespace) to the href to use and whether that page exists.
  ///
  /// An existing page's link is `<a href="HREF" class="wikilink">TEXT</a>`, a missing one's
  /// `<a href="HREF" class="wikilink missing-page" title="Create this page">TEXT</a>`, where TEXT
  /// is the label, or the target when there is no label. `link` is called once per distinct
  /// target.
  ///
  /// `resource`, when given, is asked for the URL of each Markdown link and image as written
  /// (`![plan](plan.png)` asks for `plan.png`) and may return another (the page's attachment
  /// of that name); nil leaves it. What it returns goes through cmark's safe mode like any URL.
  public func render(
    _ markdown: String, link: (String) -> WikiLinkTarget,
    resource: ((_ url: String, _ isImage: Bool) -> String?)? = nil
  ) -> String {
    // cmark draws each wiki link as an empty link to a placeholder URL that nothing else in the
    // output can carry (a random nonce), which is then replaced by the link's HTML. (cmark's
    // custom inline nodes would carry the HTML themselves, but table cells cannot hold them.)
    let placeholder = "wikilink:\(Self.nonce()):"
    var anchors: [String] = []
    var sourceTargets: Set<TitleKey>?
    var resolved: [TitleKey: WikiLinkTarget] = [:]

    let html = CMarkHTML.render(markdown, rewritingURL: resource) { text in
      let bytes = Array(text.utf8)
      let matches = WikiLinkSyntax.matches(in: bytes)
      if matches.isEmpty { return nil }
      let known = sourceTargets ?? WikiLinkSyntax.targets(in: Array(markdown.utf8))
      sourceTargets = known

      var pieces: [InlinePiece] = []
      var copied = 0
      for match in matches {
        let key = TitleKey(title: match.target)
        guard known.contains(key) else { continue }
        if copied < match.range.lowerBound {
          pieces.append(
            .text(String(decoding: bytes[copied..<match.range.lowerBound], as: UTF8.self)))
        }
        let target: WikiLinkTarget
        if let found = resolved[key] {
          target = found
        } else {
          target = link(match.target)
          resolved[key] = target
        }
        pieces.append(.emptyLink(url: placeholder + String(anchors.count)))
        anchors.append(Self.anchor(target, text: match.label ?? match.target))
        copied = match.range.upperBound
      }
      if pieces.isEmpty { return nil }
      if copied < bytes.count {
        pieces.append(.text(String(decoding: bytes[copied...], as: UTF8.self)))
      }
      return pieces
    }
    if anchors.isEmpty { return html }
    return Self.replacingPlaceholders(in: html, placeholder: placeholder, with: anchors)
  }

  /// The text a reader sees of `markdown`, without markup, on one line: what a search result's
  /// snippet quotes. A [[wiki link]] is its label (or its target), a link or image its text,
  /// code as written, table cells and blocks separated by spaces.
  ///
  /// ```swift
  /// MarkdownRenderer().plainText("# Plan\n\nSee [[Home|the home page]] and `make test`.")
  /// // "Plan See the home page and make test."
  /// ```
  public func plainText(_ markdown: String) -> String {
    var sourceTargets: Set<TitleKey>?
    let text = CMarkHTML.render(markdown, plainText: true) { text in
      let bytes = Array(text.utf8)
      let matches = WikiLinkSyntax.matches(in: bytes)
      if matches.isEmpty { return nil }
      let known = sourceTargets ?? WikiLinkSyntax.targets(in: Array(markdown.utf8))
      sourceTargets = known
      var out = ""
      var copied = 0
      for match in matches where known.contains(TitleKey(title: match.target)) {
        out += String(decoding: bytes[copied..<match.range.lowerBound], as: UTF8.self)
        out += match.label ?? match.target
        copied = match.range.upperBound
      }
      if copied == 0 { return nil }
      out += String(decoding: bytes[copied...], as: UTF8.self)
      return [.text(out)]
    }
    // One line: runs of white space (line breaks, table cells' separators) become one space.
    var line = ""
    line.reserveCapacity(text.utf8.count)
    var pendingSpace = false
    for character in text {
      if character.isWhitespace {
        pendingSpace = !line.isEmpty
      } else {
        if pendingSpace { line.append(" ") }
        pendingSpace = false
        line.append(character)
      }
    }
    return line
  }

  /// The HTML of a wiki link to `target` reading `text`.
  static func anchor(_ target: WikiLinkTarget, text: String) -> String {
    // The caller's href, unless it is one that cmark's safe mode would drop from a link.
    let href = HTMLEscaping.isDangerousURL(target.href) ? "" : HTMLEscaping.escape(target.href)
    let text = HTMLEscaping.escape(text)
    return target.exists
      ? "<a href=\"\(href)\" class=\"wikilink\">\(text)</a>"
      : "<a href=\"\(href)\" class=\"wikilink missing-page\" title=\"Create this page\">\(text)</a>"
  }

  /// 128 random bits in hexadecimal.
  private static func nonce() -> String {
    var generator = SystemRandomNumberGenerator()
    let high = generator.next()
    let low = generator.next()
    return String(high, radix: 16) + "-" + String(low, radix: 16)
  }

  /// `html` with each `<a href="PLACEHOLDERn"></a>` replaced by `anchors[n]`, in one pass.
  static func replacingPlaceholders(
    in html: String, placeholder: String, with anchors: [String]
  ) -> String {
    let needle = Array("<a href=\"\(placeholder)".utf8)
    let tail = Array("\"></a>".utf8)
    let bytes = Array(html.utf8)
    var out: [UInt8] = []
    out.reserveCapacity(bytes.count + anchors.reduce(0) { $0 + $1.utf8.count })
    var copied = 0
    var i = 0
    while let start = bytes[i...].firstIndex(of: UInt8(ascii: "<")) {
      i = start + 1
      guard bytes[start...].starts(with: needle) else { continue }
      var end = start + needle.count
      var index = 0
      var digits = 0
      while end < bytes.count, digits < 10, case let digit = bytes[end] &- UInt8(ascii: "0"),
        digit < 10
      {
        index = index * 10 + Int(digit)
        digits += 1
        end += 1
      }
      guard digits > 0, index < anchors.count, bytes[end...].starts(with: tail) else { continue }
      out.append(contentsOf: bytes[copied..<start])
      out.append(contentsOf: anchors[index].utf8)
      copied = end + tail.count
      i = copied
    }
    out.append(contentsOf: bytes[copied...])
    return String(decoding: out, as: UTF8.self)
  }
}
