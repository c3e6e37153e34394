import Testing
import WikiMarkdown

/// Renders with wiki links to `/wiki/TITLE`, existing unless the title starts with "New".
func render(_ markdown: String) -> String {
  MarkdownRenderer().render(markdown) { title in
    WikiLinkTarget(href: "/wiki/" + title, exists: !title.hasPrefix("New"))
  }
}

/// Markdown and GitHub Flavored Markdown as cmark-gfm renders them.
@Suite struct MarkdownTests {
  @Test func headingsParagraphsAndEmphasis() {
    let html = render("# Title\n\nSome *emphasis*, **strong** and `code`.\n\n## Part\n\nMore.")
    #expect(
      html
        == """
        <h1>Title</h1>
        <p>Some <em>emphasis</em>, <strong>strong</strong> and <code>code</code>.</p>
        <h2>Part</h2>
        <p>More.</p>

        """)
  }

  @Test(
    "plain text: no markup, wiki links as their labels, links and images as their text, tables and code on one line"
  )
  func plainText() {
    let text = MarkdownRenderer().plainText(
      """
      # Plan

      See [[Home]] and [[Release notes|the notes]], *soon*; [site](https://example.com) ![a map](map.png)

      | step | who |
      | --- | --- |
      | build | **ann** |

      ```
      make test
      ```

      Done <b>now</b>, `[[not a link]]` ~~old~~

      <script>alert(1)</script>
      """)
    #expect(
      text
        == "Plan See Home and the notes, soon; site a map step who build ann make test Done now, [[not a link]] old"
    )
    #expect(MarkdownRenderer().plainText("") == "")
    #expect(MarkdownRenderer().plainText("[[a|b]] [[c]]\n\n\n  x") == "b c x")
  }

  @Test func smartPunctuationIsOff() {
    #expect(render(#"It's "quoted" -- here..."#) == "<p>It's &quot;quoted&quot; -- here...</p>\n")
  }

  @Test func table() {
    let html = render("| Name | Count |\n|:-----|------:|\n| a | 1 |\n| b | 2 |")
    #expect(html.contains("<table>"))
    #expect(html.contains("<th align=\"left\">Name</th>"))
    #expect(html.contains("<td align=\"right\">2</td>"))
    #expect(html.contains("</table>"))
  }

  @Test func strikethrough() {
    #expect(render("~~gone~~ here") == "<p><del>gone</del> here</p>\n")
  }

  @Test func autolinks() {
    #expect(
      render("See https://example.com and www.example.org.")
        == """
        <p>See <a href="https://example.com">https://example.com</a> and \
        <a href="http://www.example.org">www.example.org</a>.</p>

        """)
  }

  @Test func taskList() {
    let html = render("- [ ] todo\n- [x] done")
    #expect(html.contains("<li><input type=\"checkbox\" disabled=\"\" /> todo</li>"))
    #expect(html.contains("<li><input type=\"checkbox\" checked=\"\" disabled=\"\" /> done</li>"))
  }

  @Test func fencedCodeKeepsItsLanguage() {
    #expect(
      render("```swift\nlet x = 1 < 2\n```")
        == "<pre><code class=\"language-swift\">let x = 1 &lt; 2\n</code></pre>\n")
  }

  @Test func emptyAndBlankDocuments() {
    #expect(render("") == "")
    #expect(render("   \n\n\t\n") == "")
  }

  @Test func nulAndNonASCIIText() {
    #expect(render("a\u{0}b") == "<p>a\u{FFFD}b</p>\n")
    #expect(render("Grüße, 世界 🎉") == "<p>Grüße, 世界 🎉</p>\n")
  }

  /// Renders on several threads at once come out as alone. (cmark-gfm's parser changes a
  /// global table of special characters, so parses must not overlap.)
  @Test func concurrentRendersAgree() async {
    let markdown = String(
      repeating: """
        Some ~~old~~ text at https://example.com/x, www.example.org and [[Link]].

        | a | b |
        |---|---|
        | ~~c~~ | https://d.example |


        """, count: 10)
    let renderer = MarkdownRenderer()
    let link = { @Sendable (title: String) in WikiLinkTarget(href: "/wiki/" + title, exists: true) }
    let expected = renderer.render(markdown, link: link)
    #expect(expected.contains("<del>c</del>"))
    #expect(expected.contains("<a href=\"http://www.example.org\">"))
    let mismatches = await withTaskGroup(of: Int.self) { group in
      for _ in 0..<4 {
        group.addTask {
          (0..<100).count { _ in renderer.render(markdown, link: link) != expected }
        }
      }
      return await group.reduce(0, +)
    }
    #expect(mismatches == 0)
  }

  /// A 10 KB page of mixed Markdown with wiki links renders completely, and fast.
  @Test func tenKilobytePage() {
    var markdown = ""
    var section = 0
    while markdown.utf8.count < 10_000 {
      section += 1
      markdown += """
        ## Section \(section)

        Some *text* with [[Page \(section)]], [[New \(section)|a new page]] and `[[code]]`, \
        https://example.com/\(section) and ~~old~~ words.

        | a | b |
        |---|---|
        | [[Cell \(section)]] | \(section) |

        - [x] done
        - [ ] todo


        """
    }
    let renderer = MarkdownRenderer()
    let link = { (title: String) in WikiLinkTarget(href: "/wiki/" + title, exists: true) }
    let html = renderer.render(markdown, link: link)
    #expect(html.contains("<h2>Section \(section)</h2>"))
    #expect(
      html.contains("<a href=\"/wiki/Cell \(section)\" class=\"wikilink\">Cell \(section)</a>"))
    #expect(!html.contains("[[Page"))
    let clock = ContinuousClock()
    let runs = 20
    let elapsed = clock.measure {
      for _ in 0..<runs { _ = renderer.render(markdown, link: link) }
    }
    // Well under a millisecond in release; generous for debug builds and busy machines.
    #expect(elapsed / runs < .milliseconds(50), "\(elapsed / runs) per render")
  }
}
