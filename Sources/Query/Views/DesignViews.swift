import Crypto
public import JSON
public import Projections

/// The views of one design document (CouchDB's view group): their map and reduce functions,
/// the language, the CommonJS modules of `views.lib`, and the signature that names the index
/// built from them (a change to any of these is a new index, built from the start, as CouchDB
/// builds one when the signature changes).
///
/// ```swift
/// let group = try DesignViews(id: "_design/pages", rev: rev, body: ddoc)
/// group.views.map(\.name)   // ["by_title", "by_wiki"]
/// group.signature           // "5d2b…" (hex)
/// ```
public struct DesignViews: Sendable, Hashable {
  /// A built-in reduce computed natively, or a JavaScript one run by the query server.
  public enum Reduce: Sendable, Hashable {
    case count, sum, stats, approxCountDistinct
    case function(String)

    /// The reduce of `source` (`_count`, `_sum`, `_stats`, `_approx_count_distinct`, or a
    /// function's source). As CouchDB's `couch_query_servers` matches them, a built-in's name
    /// may have anything after it (`_sum_of_n` is `_sum`); what saving a design document takes
    /// is only those four (`DesignDocumentCheck`).
    init(_ source: String) {
      if source.hasPrefix("_count") {
        self = .count
      } else if source.hasPrefix("_sum") {
        self = .sum
      } else if source.hasPrefix("_stats") {
        self = .stats
      } else if source.hasPrefix("_approx_count_distinct") {
        self = .approxCountDistinct
      } else {
        self = .function(source)
      }
    }

    /// Whether the index keeps per-bucket sums of the values (``count`` always).
    var keepsSums: Bool { self == .sum || self == .stats }
  }

  /// One view: its name, map function and reduce.
  public struct View: Sendable, Hashable {
    public let name: String
    public let map: String
    public let reduce: Reduce?
    /// `"options": {"collation": "raw"}`: keys ordered by CouchDB's raw collation
    /// (``Projections/Collation/encodeRaw(_:into:)``) instead of ICU's.
    public var raw: Bool = false

    /// Appends `key`'s encoding under the view's collation.
    func encode(_ key: JSONValue, into out: inout [UInt8]) {
      Self.encode(key, raw: raw, into: &out)
    }

    /// Appends `key`'s encoding under the raw collation or ICU's.
    static func encode(_ key: JSONValue, raw: Bool, into out: inout [UInt8]) {
      if raw { Collation.encodeRaw(key, into: &out) } else { Collation.encode(key, into: &out) }
    }
  }

  /// The design document's id (`_design/…`) and revision.
  public let id: String
  public let rev: String
  /// `language`, `javascript` by default.
  public let language: String
  /// The views, sorted by name; a view's place in this list numbers its rows in the index.
  public let views: [View]
  /// `views.lib`: CommonJS modules for `require` in map functions.
  public let lib: JSONValue?
  /// `options.include_design`: map functions also see design documents.
  public let includeDesign: Bool
  /// Hex SHA-256 of what the index is built from: the language, the views and their lib.
  public let signature: String
  /// The whole design document (for its other functions).
  public let document: JSONValue

  /// Reads the views of design document `id` at revision `rev`; a design document with a
  /// broken `views` field is refused as CouchDB refuses it when it is saved.
  public init(id: String, rev: String, body: JSONValue) throws(StoreError) {
    guard case .object(let object) = body else {
      throw StoreError("invalid_design_doc", "Design document must be an object", code: .badRequest)
    }
    self.id = id
    self.rev = rev
    document = body
    language = object["language"]?.stringValue ?? "javascript"
    var views: [View] = []
    var lib: JSONValue? = nil
    if case .object(let all) = object["views"] {
      for member in all.members {
        if member.key == "lib" {
          lib = member.value
          continue
        }
        guard case .object(let view) = member.value, let map = view["map"]?.stringValue else {
          continue
        }
        let reduce = view["reduce"]?.stringValue.map(Reduce.init)
        let raw = view["options"]?["collation"]?.stringValue == "raw"
        views.append(View(name: member.key, map: map, reduce: reduce, raw: raw))
      }
    }
    views.sort { $0.name < $1.name }
    guard views.count <= Self.maxViews else {
      throw StoreError(
        "invalid_design_doc",
        "a design document may have at most \(Self.maxViews) views in wikilog; this one has \(views.count)",
        code: .badRequest)
    }
    self.views = views
    self.lib = lib
    includeDesign = object["options"]?.objectValue?["include_design"]?.boolValue ?? false
    // The rows' layout is part of the signature: an index of an older layout (doc ids of equal
    // keys in collation order, maps without `_conflicts`) is built again under a new name.
    var hashed: [JSONValue] = [.string("rows-2"), .string(language), .bool(includeDesign)]
    for view in views {
      let reduce: String
      switch view.reduce {
      case .none: reduce = ""
      case .count?: reduce = "_count"
      case .sum?: reduce = "_sum"
      case .stats?: reduce = "_stats"
      case .approxCountDistinct?: reduce = "_approx_count_distinct"
      case .function(let source)?: reduce = source
      }
      // A raw view's rows are laid out otherwise: a signature of its own (and others keep
      // theirs).
      hashed.append(
        .array(
          [.string(view.name), .string(view.map), .string(reduce)]
            + (view.raw ? [.string("raw")] : [])))
    }
    hashed.append(lib ?? .null)
    let digest = SHA256.hash(data: JSONValue.array(hashed).serialized())
    signature = digest.map { byte in
      let hex = String(byte, radix: 16)
      return byte < 16 ? "0" + hex : hex
    }.joined()
  }

  /// The most views one design document may have (a view's number is one byte of its rows'
  /// keys).
  public static let maxViews = 255

  /// The view named `name`, and its number in the index.
  public func view(named name: String) -> (number: Int, view: View)? {
    guard let i = views.firstIndex(where: { $0.name == name }) else { return nil }
    return (i, views[i])
  }

  /// The name of the index behind the log built from these views (its directory under the
  /// database's): `views-` and the first 32 digits of the signature.
  public var indexName: String { "views-" + signature.prefix(32) }
}
