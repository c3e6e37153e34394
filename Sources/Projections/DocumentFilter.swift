/// A named filter on documents by id, with its parameters: what `filter=NAME` selects in the
/// changes feed, and what history, audit and `wikilog tail` can be narrowed to.
///
/// Modules register their filters by name in a ``DocumentFilters`` (the wiki's `wiki` filter,
/// `filter=wiki&wiki=ID`, comes from the Wiki module), and the HTTP server looks them up there,
/// so it knows no filter of its own beyond CouchDB's `_doc_ids` and `_selector`.
///
/// A waiting live feed is woken by the changes its filter may include, without a read: it
/// registers under the filter's ``wakeKeys``, and a change of document `id` wakes the feeds
/// registered under any of the keys the filter's `keys` function gives for `id`.
///
/// ```swift
/// // Documents whose id starts with a prefix given as `prefix=`.
/// var filters = DocumentFilters()
/// filters.register("prefix") { parameter in
///   guard let p = parameter("prefix") else { throw .badRequest("prefix=... is required") }
///   return DocumentFilter(
///     name: "prefix", parameters: ["prefix": p], wakeKeys: [p],
///     keys: { id in [String(id.prefix(p.count))] }, includes: { $0.hasPrefix(p) })
/// }
/// ```
public struct DocumentFilter: Sendable, Hashable, CustomStringConvertible {
  public let name: String
  public let parameters: [String: String]
  /// The keys a waiting feed with this filter registers under.
  public let wakeKeys: Set<String>
  private let keysOf: @Sendable (String) -> [String]
  private let test: @Sendable (String) -> Bool

  /// - Parameters:
  ///   - keys: the keys a change of a document wakes (for filters of this name).
  ///   - includes: whether the filter passes a document id.
  public init(
    name: String, parameters: [String: String], wakeKeys: Set<String>,
    keys: @escaping @Sendable (String) -> [String],
    includes: @escaping @Sendable (String) -> Bool
  ) {
    self.name = name
    self.parameters = parameters
    self.wakeKeys = wakeKeys
    self.keysOf = keys
    self.test = includes
  }

  /// Whether the filter passes document `id`.
  public func includes(_ id: String) -> Bool { test(id) }

  /// The keys a change of document `id` wakes, for feeds filtered by name ``name``.
  public func keys(of id: String) -> [String] { keysOf(id) }

  public static func == (a: DocumentFilter, b: DocumentFilter) -> Bool {
    a.name == b.name && a.parameters == b.parameters
  }

  public func hash(into hasher: inout Hasher) {
    hasher.combine(name)
    hasher.combine(parameters)
  }

  public var description: String {
    ([name] + parameters.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" })
      .joined(separator: " ")
  }
}

/// Document filters by name: each name makes a ``DocumentFilter`` from the request's
/// parameters.
public struct DocumentFilters: Sendable {
  /// Makes a filter from its parameters (`parameter(name)` is nil when absent); throws
  /// ``StoreError`` `bad_request` when they do not do.
  public typealias Factory =
    @Sendable (_ parameter: (String) -> String?) throws(StoreError) ->
    DocumentFilter

  private var factories: [String: Factory] = [:]

  public init() {}

  /// Registers (or replaces) the filter `name`.
  public mutating func register(_ name: String, _ factory: @escaping Factory) {
    factories[name] = factory
  }

  /// The names registered, sorted.
  public var names: [String] { factories.keys.sorted() }

  /// The filter `name` made from `parameter`, or nil when no filter has that name.
  public func make(_ name: String, parameter: (String) -> String?) throws(StoreError)
    -> DocumentFilter?
  {
    guard let factory = factories[name] else { return nil }
    return try factory(parameter)
  }
}
