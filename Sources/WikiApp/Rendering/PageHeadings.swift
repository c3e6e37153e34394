/// One `h1` a page: the headings of a page's rendered Markdown arranged around the page's own
/// title. A page whose Markdown opens with its only `# Heading` has that heading as its `h1`
/// (the title is then shown above it, not as a heading); any other page has its title as the
/// `h1`, and its Markdown's headings one level down (`#` an `h2`, …, `######` stays an `h6`).
/// The editor's preview, under the editor's own `h1`, always has them one level down.
enum PageHeadings {
  /// The Markdown's HTML as the page view shows it, and whether the title is the page's `h1`.
  static func arranged(_ html: String) -> (html: String, titleHeading: Bool) {
    let opening = html.matches(of: #/<h1[\s>]/#).count
    if opening == 0 { return (html, true) }
    if opening == 1, html.drop(while: \.isWhitespace).hasPrefix("<h1") { return (html, false) }
    return (shifted(html), true)
  }

  /// Every heading of the HTML one level down (`h6` stays `h6`). The HTML is the Markdown
  /// renderer's, where a `<` of the text is always escaped: each `<hN` and `</hN` is a tag.
  static func shifted(_ html: String) -> String {
    html.replacing(#/<(/?)h([1-6])(?=[\s>])/#) { match in
      let level = min(Int(match.output.2)! + 1, 6)
      return "<\(match.output.1)h\(level)"
    }
  }
}
