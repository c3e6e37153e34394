// All of WikiMarkdown's calls into cmark-gfm, the one file with unsafe code.

import CMark
import Synchronization

/// Inline content that replaces a text node (see ``CMarkHTML/render(_:rewritingText:)``).
enum InlinePiece: Equatable {
  /// Text, escaped by cmark when rendered.
  case text(String)
  /// A link without content, rendered by cmark as `<a href="URL"></a>` (URL escaped as an href).
  case emptyLink(url: String)
}

/// Registers cmark-gfm's core extensions in its global registry, once per process.
///
/// `cmark_gfm_core_extensions_ensure_registered` is not thread-safe on its first call; a global
/// `let` is initialized exactly once, under a lock.
private let coreExtensionsRegistered: Bool = {
  cmark_gfm_core_extensions_ensure_registered()
  return true
}()

/// Held while cmark-gfm parses.
///
/// cmark-gfm keeps the inline parser's table of special characters in a global, which every
/// parse with inline extensions changes: it adds the extensions' characters (`~` for
/// strikethrough, `:` and `w` for autolinks) before parsing inlines, also for each table row,
/// and removes them after. A parse on another thread that finishes first removes them under a
/// parse still running, which then misses strikethroughs and autolinks. Rendering, and the
/// changes to the tree between parsing and rendering, touch no global state.
private let parseLock = Mutex(())

/// GitHub Flavored Markdown to HTML with cmark-gfm.
enum CMarkHTML {
  /// The GFM extensions attached to every parser.
  static let extensions = ["table", "strikethrough", "autolink", "tasklist", "tagfilter"]

  /// cmark's defaults: no smart punctuation and without `CMARK_OPT_UNSAFE`, so raw HTML is
  /// omitted and links and images to `javascript:`, `vbscript:`, `file:` and non-image `data:`
  /// URLs lose their URL.
  static let options = CMARK_OPT_DEFAULT

  /// The HTML of `markdown`.
  ///
  /// After parsing, adjacent text nodes are merged, and `rewrite` is called with the text of
  /// each text node that has a `[[` and is outside links and images (so never with code, which
  /// cmark keeps in code nodes). When it returns pieces, they replace the node.
  ///
  /// With `plainText`, the text of the document instead (``text(of:)``): no markup, links and
  /// images as their text, code as written, raw HTML left out, blocks separated by a line break.
  static func render(
    _ markdown: String, rewritingURL rewriteURL: ((String, _ isImage: Bool) -> String?)? = nil,
    plainText: Bool = false, rewritingText rewrite: (String) -> [InlinePiece]?
  ) -> String {
    _ = coreExtensionsRegistered
    let mem = unsafe cmark_get_default_mem_allocator()
    guard let parser = unsafe cmark_parser_new_with_mem(options, mem) else { return "" }
    defer { unsafe cmark_parser_free(parser) }
    for name in extensions {
      if let extensionPointer = unsafe cmark_find_syntax_extension(name) {
        _ = unsafe cmark_parser_attach_syntax_extension(parser, extensionPointer)
      }
    }
    // The whole string, NULs included (cmark replaces them with U+FFFD).
    let length = markdown.utf8.count
    var parsed: OpaquePointer? = nil
    parseLock.withLock { _ in
      unsafe markdown.withCString { unsafe cmark_parser_feed(parser, $0, length) }
      unsafe parsed = cmark_parser_finish(parser)
    }
    guard let document = unsafe parsed else { return "" }
    defer { unsafe cmark_node_free(document) }

    unsafe cmark_consolidate_text_nodes(document)
    if let rewriteURL { unsafe rewriteURLs(of: document, rewriteURL) }
    unsafe rewriteTextNodes(of: document, mem: mem, rewrite)

    if plainText { return unsafe text(of: document) }
    guard
      let html = unsafe cmark_render_html(
        document, options, cmark_parser_get_syntax_extensions(parser))
    else { return "" }
    defer { unsafe mem?.pointee.free(html) }
    return unsafe String(cString: html)
  }

  /// The literal text of `document`'s text and code nodes, a line break after each block
  /// (paragraphs, headings, list items, table cells: `cmark_render_plaintext` would keep a
  /// table's pipes and its delimiter row).
  @unsafe
  private static func text(of document: OpaquePointer) -> String {
    guard let iterator = unsafe cmark_iter_new(document) else { return "" }
    defer { unsafe cmark_iter_free(iterator) }
    var out = ""
    while true {
      let event = unsafe cmark_iter_next(iterator)
      if event == CMARK_EVENT_DONE { break }
      guard let node = unsafe cmark_iter_get_node(iterator) else { continue }
      let type = unsafe cmark_node_get_type(node)
      switch type {
      case CMARK_NODE_TEXT, CMARK_NODE_CODE, CMARK_NODE_CODE_BLOCK:
        if let literal = unsafe cmark_node_get_literal(node) {
          out += unsafe String(cString: literal)
        }
        if type == CMARK_NODE_CODE_BLOCK { out += "\n" }
      case CMARK_NODE_SOFTBREAK, CMARK_NODE_LINEBREAK:
        out += "\n"
      default:
        let isBlock = Int32(type.rawValue) & CMARK_NODE_TYPE_MASK == CMARK_NODE_TYPE_BLOCK
        if isBlock && event == CMARK_EVENT_EXIT { out += "\n" }
      }
    }
    return out
  }

  /// Whether the C string `text` has a `[[`.
  @unsafe
  private static func hasDoubleBracket(_ text: UnsafePointer<CChar>) -> Bool {
    let bracket = CChar(UInt8(ascii: "["))
    var previous: CChar = 0
    var next = unsafe text
    while case let byte = unsafe next.pointee, byte != 0 {
      if byte == bracket, previous == bracket { return true }
      previous = byte
      unsafe next += 1
    }
    return false
  }

  /// Gives each link and image of `document` the URL `rewrite` returns for it (nil: as it is).
  @unsafe
  private static func rewriteURLs(
    of document: OpaquePointer, _ rewrite: (String, Bool) -> String?
  ) {
    guard let iterator = unsafe cmark_iter_new(document) else { return }
    defer { unsafe cmark_iter_free(iterator) }
    while true {
      let event = unsafe cmark_iter_next(iterator)
      if event == CMARK_EVENT_DONE { break }
      guard event == CMARK_EVENT_ENTER, let node = unsafe cmark_iter_get_node(iterator) else {
        continue
      }
      let type = unsafe cmark_node_get_type(node)
      guard type == CMARK_NODE_LINK || type == CMARK_NODE_IMAGE,
        let url = unsafe cmark_node_get_url(node),
        let replaced = rewrite(unsafe String(cString: url), type == CMARK_NODE_IMAGE)
      else { continue }
      // Setting a URL leaves the tree's shape as it is: the iterator walks on.
      _ = unsafe cmark_node_set_url(node, replaced)
    }
  }

  /// Replaces the text nodes of `document` that `rewrite` splits.
  @unsafe
  private static func rewriteTextNodes(
    of document: OpaquePointer, mem: UnsafeMutablePointer<cmark_mem>?,
    _ rewrite: (String) -> [InlinePiece]?
  ) {
    // Collect first: the tree is not changed while the iterator walks it.
    var textNodes: [OpaquePointer] = unsafe []
    guard let iterator = unsafe cmark_iter_new(document) else { return }
    var linkDepth = 0
    while true {
      let event = unsafe cmark_iter_next(iterator)
      if event == CMARK_EVENT_DONE { break }
      guard let node = unsafe cmark_iter_get_node(iterator) else { continue }
      switch unsafe cmark_node_get_type(node) {
      case CMARK_NODE_LINK, CMARK_NODE_IMAGE:
        linkDepth += event == CMARK_EVENT_ENTER ? 1 : -1
      case CMARK_NODE_TEXT where linkDepth == 0:
        unsafe textNodes.append(node)
      default:
        break
      }
    }
    unsafe cmark_iter_free(iterator)

    for index in unsafe textNodes.indices {
      let node = unsafe textNodes[index]
      guard let literal = unsafe cmark_node_get_literal(node), unsafe hasDoubleBracket(literal),
        let pieces = rewrite(unsafe String(cString: literal))
      else { continue }
      for piece in pieces {
        let inserted: OpaquePointer?
        switch piece {
        case .text(let text):
          unsafe inserted = cmark_node_new_with_mem(CMARK_NODE_TEXT, mem)
          if let inserted = unsafe inserted { _ = unsafe cmark_node_set_literal(inserted, text) }
        case .emptyLink(let url):
          unsafe inserted = cmark_node_new_with_mem(CMARK_NODE_LINK, mem)
          if let inserted = unsafe inserted { _ = unsafe cmark_node_set_url(inserted, url) }
        }
        guard let inserted = unsafe inserted else { continue }
        if unsafe cmark_node_insert_before(node, inserted) == 0 {
          unsafe cmark_node_free(inserted)
        }
      }
      unsafe cmark_node_unlink(node)
      unsafe cmark_node_free(node)
    }
  }
}
