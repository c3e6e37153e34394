import Testing
import WikiMarkdown

/// No script gets into the HTML: raw HTML is omitted, dangerous URLs dropped, wiki links escaped.
@Suite struct SafetyTests {
  static let attacks = [
    "<script>alert(1)</script>",
    "<SCRIPT SRC=//evil.example/x.js></SCRIPT>",
    "text <script>alert(1)</script> inline",
    "<img src=x onerror=alert(1)>",
    "text <img src=x onerror=alert(1)> inline",
    "<svg/onload=alert(1)>",
    "[x](javascript:alert(1))",
    "[x](JaVaScRiPt:alert(1))",
    "[x](vbscript:msgbox(1))",
    "[x](file:///etc/passwd)",
    "[x](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "[x](<javascript:alert(1)>)",
    "[x]( javascript:alert(1) )",
    "[x](java\tscript:alert(1))",
    "[x](&#106;avascript:alert(1))",
    "[x](&#x6A;avascript&colon;alert(1))",
    "[x](java&#x09;script:alert(1))",
    "[x](java&#10;script:alert(1))",
    "[x](javascript&#58;alert(1))",
    "[x][r]\n\n[r]: javascript:alert(1)",
    "![x](javascript:alert(1))",
    "![x](x.png \"\\\" onerror=\\\"alert(1)\")",
    "[x](/ \"\\\" onmouseover=\\\"alert(1)\")",
    "<a href=\"javascript:alert(1)\">x</a>",
    "<a href='&#106;avascript:alert(1)'>x</a>",
    "<javascript:alert(1)>",
    "<JAVASCRIPT:alert(1)>",
    "<vbscript:msgbox(1)>",
    "javascript:alert(1)",
    "www.example.com/\"onmouseover=\"alert(1)",
    "https://example.com/\"><script>alert(1)</script>",
    "&lt;script&gt;alert(1)&lt;/script&gt;",
    "&#60;script&#62;alert(1)&#60;/script&#62;",
    "`<script>alert(1)</script>`",
    "```html\n<script>alert(1)</script>\n```",
    "```\" onmouseover=\"alert(1)\nx\n```",
    "<!-- x --><script>alert(1)</script>",
    "<style>body{background:url(javascript:alert(1))}</style>",
    "<iframe src=javascript:alert(1)></iframe>",
    "[[<script>]]",
    "[[<script>alert(1)</script>]]",
    "[[x\" onmouseover=\"alert(1)]]",
    "[[x' onmouseover='alert(1)]]",
    "[[x|<img src=x onerror=alert(1)>]]",
    "[[x|\" onmouseover=\"alert(1)]]",
    "[[javascript:alert(1)]]",
    "[[&#106;avascript:alert(1)]]",
    "| [[x\" onmouseover=\"alert(1)]] | <script>alert(1)</script> |\n|---|---|\n| a | b |",
  ]

  @Test(arguments: attacks)
  func inert(_ markdown: String) {
    // The resolver used as carelessly as possible: the title as the href.
    for exists in [true, false] {
      let html = MarkdownRenderer().render(markdown) { WikiLinkTarget(href: $0, exists: exists) }
      #expect(HTMLCheck.problems(in: html).isEmpty, "\(html)")
      #expect(!html.lowercased().contains("<script"), "\(html)")
    }
  }

  @Test func rawHTMLIsOmitted() {
    #expect(render("<script>alert(1)</script>") == "<!-- raw HTML omitted -->\n")
    #expect(
      render("a <img src=x onerror=alert(1)> b") == "<p>a <!-- raw HTML omitted --> b</p>\n")
  }

  @Test func dangerousLinkURLsAreDropped() {
    #expect(render("[x](javascript:alert(1))") == "<p><a href=\"\">x</a></p>\n")
    #expect(render("[x](&#106;avascript:alert(1))") == "<p><a href=\"\">x</a></p>\n")
    #expect(
      render("<javascript:alert(1)>") == "<p><a href=\"\">javascript:alert(1)</a></p>\n")
    // Image data URLs are kept.
    #expect(
      render("![x](data:image/png;base64,AAAA)")
        == "<p><img src=\"data:image/png;base64,AAAA\" alt=\"x\" /></p>\n")
  }

  @Test func dangerousWikiLinkHrefsAreDropped() {
    for href in [
      "javascript:alert(1)", " JavaScript:alert(1)", "java\tscript:alert(1)", "\u{1}vbscript:x",
      "file:///etc/passwd", "data:text/html,x",
    ] {
      let html = MarkdownRenderer().render("[[A]]") { _ in WikiLinkTarget(href: href, exists: true)
      }
      #expect(html == "<p><a href=\"\" class=\"wikilink\">A</a></p>\n", "\(href)")
    }
    let image = MarkdownRenderer().render("[[A]]") { _ in
      WikiLinkTarget(href: "data:image/png;base64,AAAA", exists: true)
    }
    #expect(image.contains("href=\"data:image/png;base64,AAAA\""))
  }

  @Test func checkerFindsProblems() {
    #expect(!HTMLCheck.problems(in: "<a href=\"&#106;avascript:x\">").isEmpty)
    #expect(!HTMLCheck.problems(in: "<img src=x onerror=alert(1)>").isEmpty)
    #expect(!HTMLCheck.problems(in: "<a href='java\tscript:x'>").isEmpty)
    #expect(!HTMLCheck.problems(in: "<script>").isEmpty)
    #expect(HTMLCheck.problems(in: "<a href=\"/x\" title=\"onclick=x\">javascript:x</a>").isEmpty)
  }
}

/// A small HTML tag scanner that reports what would run script: `script`, `iframe`, `object`,
/// `embed` and `style` elements, `on…` attributes and `javascript:`, `vbscript:` or `data:`
/// URLs in attributes (after decoding character references, as browsers do).
enum HTMLCheck {
  static func problems(in html: String) -> [String] {
    var problems: [String] = []
    let chars = Array(html.unicodeScalars)
    var i = 0
    func skipSpace() { while i < chars.count, chars[i].properties.isWhitespace { i += 1 } }
    while i < chars.count {
      guard chars[i] == "<" else {
        i += 1
        continue
      }
      i += 1
      if chars[i...].starts(with: "!--".unicodeScalars) {
        while i < chars.count, !chars[i...].starts(with: "-->".unicodeScalars) { i += 1 }
        continue
      }
      var name = ""
      while i < chars.count, chars[i] != ">", !chars[i].properties.isWhitespace {
        name.unicodeScalars.append(chars[i])
        i += 1
      }
      let tag = name.lowercased().trimmingPrefix("/")
      if ["script", "iframe", "object", "embed", "style", "svg"].contains(String(tag)) {
        problems.append("<\(name)>")
      }
      // Attributes.
      while i < chars.count, chars[i] != ">" {
        skipSpace()
        var attribute = ""
        while i < chars.count, chars[i] != "=", chars[i] != ">", !chars[i].properties.isWhitespace {
          attribute.unicodeScalars.append(chars[i])
          i += 1
        }
        skipSpace()
        var value = ""
        if i < chars.count, chars[i] == "=" {
          i += 1
          skipSpace()
          if i < chars.count, chars[i] == "\"" || chars[i] == "'" {
            let quote = chars[i]
            i += 1
            while i < chars.count, chars[i] != quote {
              value.unicodeScalars.append(chars[i])
              i += 1
            }
            i += 1
          } else {
            while i < chars.count, chars[i] != ">", !chars[i].properties.isWhitespace {
              value.unicodeScalars.append(chars[i])
              i += 1
            }
          }
        }
        let lowered = attribute.lowercased()
        if lowered.hasPrefix("on") { problems.append("\(attribute)= in <\(name)>") }
        let url = decoded(value).unicodeScalars.filter { $0.value > 0x20 }.map(Character.init)
        let scheme = String(url).lowercased()
        if scheme.hasPrefix("javascript:") || scheme.hasPrefix("vbscript:")
          || (scheme.hasPrefix("data:") && !scheme.hasPrefix("data:image/"))
        {
          problems.append("\(attribute)=\"\(value)\" in <\(name)>")
        }
        if attribute.isEmpty, i < chars.count, chars[i] != ">" { i += 1 }
      }
    }
    return problems
  }

  /// `value` with numeric and a few named character references decoded.
  static func decoded(_ value: String) -> String {
    var out = ""
    var rest = Substring(value)
    while let amp = rest.firstIndex(of: "&") {
      out += rest[..<amp]
      rest = rest[rest.index(after: amp)...]
      guard let semicolon = rest.prefix(12).firstIndex(of: ";") else {
        out += "&"
        continue
      }
      let entity = rest[..<semicolon]
      let named = ["amp": "&", "lt": "<", "gt": ">", "quot": "\"", "colon": ":", "tab": "\t"]
      if let text = named[String(entity)] {
        out += text
      } else if entity.hasPrefix("#x") || entity.hasPrefix("#X"),
        let code = UInt32(entity.dropFirst(2), radix: 16), let scalar = Unicode.Scalar(code)
      {
        out.unicodeScalars.append(scalar)
      } else if entity.hasPrefix("#"), let code = UInt32(entity.dropFirst()),
        let scalar = Unicode.Scalar(code)
      {
        out.unicodeScalars.append(scalar)
      } else {
        out += "&"
        continue
      }
      rest = rest[rest.index(after: semicolon)...]
    }
    return out + rest
  }
}
