// libFuzzer target: request routing and query-parameter parsing of the HTTP server. The input
// is a request target (`/db/doc?rev=...`); routing and every typed reader of the query either
// answer or throw CouchDB's error.
import Foundation
import FuzzDriver

@testable import CouchAPI
@testable import Replication

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRoute(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
  let target = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
  let path: Substring
  let query: Substring?
  if let mark = target.firstIndex(of: "?") {
    path = target[..<mark]
    query = target[target.index(after: mark)...]
  } else {
    path = target[...]
    query = nil
  }
  _ = try? CouchRoute.parse(String(path))
  if let parameters = try? QueryParameters(query.map(String.init)) {
    for name in parameters.pairs.map(\.name) {
      _ = parameters.flag(name)
    }
    for name in [
      "since", "limit", "skip", "rev", "revs", "open_revs", "keys", "key", "startkey", "endkey",
      "descending", "include_docs", "heartbeat", "timeout", "feed", "atts_since", "seq_interval",
      "filter", "doc_ids", "style", "conflicts", "latest", "new_edits",
    ] {
      _ = parameters[name]
    }
    if let since = parameters["since"] { _ = QueryParameters.parseSeq(since) }
  }
  return 0
}

runFuzzer(fuzzRoute)
