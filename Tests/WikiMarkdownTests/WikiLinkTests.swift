import Testing
import WikiMarkdown

/// `[[wiki links]]`: the links the wiki's backlinks index knows, drawn as links.
@Suite struct WikiLinkTests {
  @Test func existingPage() {
    #expect(
      render("See [[Home]].") == "<p>See <a href=\"/wiki/Home\" class=\"wikilink\">Home</a>.</p>\n")
  }

  @Test func missingPage() {
    #expect(
      render("[[New Page]]")
        == "<p><a href=\"/wiki/New Page\" class=\"wikilink missing-page\" title=\"Create this page\">New Page</a></p>\n"
    )
  }

  @Test func labelsAndTrimming() {
    #expect(
      render("[[ Set up |setup guide ]]")
        == "<p><a href=\"/wiki/Set up\" class=\"wikilink\">setup guide</a></p>\n")
    // An empty label shows the target; the label is everything after the first `|`.
    #expect(render("[[A|]]") == "<p><a href=\"/wiki/A\" class=\"wikilink\">A</a></p>\n")
    #expect(render("[[A|b|c]]") == "<p><a href=\"/wiki/A\" class=\"wikilink\">b|c</a></p>\n")
    // Unicode whitespace (here U+3000 and U+00A0) is trimmed too.
    #expect(
      render("[[\u{3000}A\u{A0}]]") == "<p><a href=\"/wiki/A\" class=\"wikilink\">A</a></p>\n")
  }

  @Test func theTargetPassedToTheResolver() {
    var asked: [String] = []
    _ = MarkdownRenderer().render("[[ Ünïcödé  Page ]], [[B|x]], [[ Ünïcödé  Page |y]]") { title in
      asked.append(title)
      return WikiLinkTarget(href: "/", exists: true)
    }
    // Once per distinct target, as written inside, trimmed.
    #expect(asked == ["Ünïcödé  Page", "B"])
  }

  @Test func notLinks() {
    for markdown in ["[[]]", "[[ ]]", "[[|label]]", "[[A]", "[A]]", "[[A\nB]]", "[ [A]]"] {
      #expect(!render(markdown).contains("<a "), "\(markdown)")
    }
  }

  @Test func bracketRuns() {
    // A run of `[` opens at its last two; an opening that meets another `[[` is abandoned.
    #expect(render("[[[A]]]") == "<p>[<a href=\"/wiki/A\" class=\"wikilink\">A</a>]</p>\n")
    #expect(
      render("[[A [[B]] C]]") == "<p>[[A <a href=\"/wiki/B\" class=\"wikilink\">B</a> C]]</p>\n")
    #expect(
      render("[[A]][[B]]")
        == "<p><a href=\"/wiki/A\" class=\"wikilink\">A</a><a href=\"/wiki/B\" class=\"wikilink\">B</a></p>\n"
    )
  }

  @Test func escapingOfTitlesAndHrefs() {
    let html = MarkdownRenderer().render(#"[[Tom & Jerry's "1 < 2 > 0"]]"#) { title in
      WikiLinkTarget(href: "/wiki/" + title + "?a=1&b=2", exists: false)
    }
    #expect(
      html
        == #"<p><a href="/wiki/Tom &amp; Jerry&#39;s &quot;1 &lt; 2 &gt; 0&quot;?a=1&amp;b=2" class="wikilink missing-page" title="Create this page">Tom &amp; Jerry&#39;s &quot;1 &lt; 2 &gt; 0&quot;</a></p>"#
        + "\n")
  }

  /// `<…>` that Markdown reads as raw HTML is omitted, so such a link is not drawn.
  @Test func rawHTMLInsideIsNotALink() {
    #expect(render("[[<Show>]]") == "<p>[[<!-- raw HTML omitted -->]]</p>\n")
  }

  @Test func nonASCIITitles() {
    #expect(
      render("[[Café 世界 🎉|naïve]]")
        == "<p><a href=\"/wiki/Café 世界 🎉\" class=\"wikilink\">naïve</a></p>\n")
  }

  @Test func inCodeSpansAndCodeBlocksNotConverted() {
    #expect(render("`[[Home]]`") == "<p><code>[[Home]]</code></p>\n")
    #expect(render("```\n[[Home]]\n```") == "<pre><code>[[Home]]\n</code></pre>\n")
    #expect(render("    [[Home]]") == "<pre><code>[[Home]]\n</code></pre>\n")
    #expect(
      render("`[[Home]]` and [[Home]]")
        == "<p><code>[[Home]]</code> and <a href=\"/wiki/Home\" class=\"wikilink\">Home</a></p>\n")
  }

  @Test func inLinksAndImagesNotConverted() {
    #expect(render("[see [[Home]]](/x)") == "<p><a href=\"/x\">see [[Home]]</a></p>\n")
    #expect(render("![[[Home]]](i.png)") == "<p><img src=\"i.png\" alt=\"[[Home]]\" /></p>\n")
  }

  @Test func inOtherInlinesAndBlocks() {
    let html = render(
      "## [[Head]]\n\n> *[[Em]]* **[[Strong]]** ~~[[Del]]~~\n\n- [[Item]]\n- [ ] [[Task]]")
    for title in ["Head", "Em", "Strong", "Del", "Item", "Task"] {
      #expect(
        html.contains("<a href=\"/wiki/\(title)\" class=\"wikilink\">\(title)</a>"), "\(title)")
    }
  }

  @Test func inTableCells() {
    let html = render("| Page | Note |\n|---|---|\n| [[Home]] | [[New Thing]] |")
    #expect(html.contains("<td><a href=\"/wiki/Home\" class=\"wikilink\">Home</a></td>"))
    #expect(
      html.contains(
        "<td><a href=\"/wiki/New Thing\" class=\"wikilink missing-page\" title=\"Create this page\">New Thing</a></td>"
      ))
  }

  /// Brackets or targets the Markdown spells differently from the source are not the index's
  /// links, so they are not drawn.
  @Test func onlyTheIndexsTargets() {
    #expect(render("[[A&amp;B]]") == "<p>[[A&amp;B]]</p>\n")
    #expect(render("&#91;&#91;Home]]") == "<p>[[Home]]</p>\n")
    #expect(render("[[a *b* c]]") == "<p>[[a <em>b</em> c]]</p>\n")
  }

  @Test func placeholderURLsOfTheUserAreOrdinaryLinks() {
    #expect(
      render("[x](wikilink:0) [[A]]")
        == "<p><a href=\"wikilink:0\">x</a> <a href=\"/wiki/A\" class=\"wikilink\">A</a></p>\n")
  }
}
