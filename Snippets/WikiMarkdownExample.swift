// Markdown to HTML on cmark-gfm, with [[wiki links]].
import WikiMarkdown

let html = MarkdownRenderer().render("# Soup\n\nSee [[Stock]] and *taste*.") { title in
  WikiLinkTarget(href: "/_wiki/w1/" + title, exists: title != "Stock")
}
print(html)
