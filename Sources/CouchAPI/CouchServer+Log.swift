import Hummingbird
import JSON
import Log
import Projections

extension CouchServer {
  /// `GET /{db}/_log/head`: the log's tree head, signed now (``LogProofs`` gives the shape).
  ///
  /// `GET /{db}/_log/proof?seq=N[&tree_size=S]`: the inclusion proof of event N in the tree of
  /// the first S events (a head the client holds), or, without `tree_size`, in a head signed
  /// now, given in the proof as `"head"`.
  ///
  /// `GET /{db}/_log/proof?old_size=M[&tree_size=S]`: the consistency proof from the tree of
  /// the first M events to the tree of S (a head signed now, given as `"head"`, without it).
  ///
  /// Database and server administrators only: the leaves are the events themselves.
  func logEndpoint(
    _ endpoint: CouchRoute.LogEndpoint, _ store: DocumentStore, query: QueryParameters, head: Bool
  ) throws -> Response {
    do {
      switch endpoint {
      case .head:
        let (signed, _) = try store.log.signedTreeHead()
        return CouchResponse.json(LogProofs.json(signed), includeBody: !head)
      case .proof:
        let seq = try nonNegative(query, "seq")
        let oldSize = try nonNegative(query, "old_size")
        let treeSize = try nonNegative(query, "tree_size")
        var signed: SignedTreeHead?
        let size: UInt64
        if let treeSize {
          size = treeSize
        } else {
          signed = try store.log.signedTreeHead().head
          size = signed!.size
        }
        let current = try store.log.treeHead().size
        guard size <= current else {
          throw CouchError.notFound("the log has \(current) events, not \(size)")
        }
        var proof: JSONValue
        switch (seq, oldSize) {
        case (.some(let seq), nil):
          guard seq >= 1, seq <= size else {
            throw CouchError.notFound("no event \(seq) in a tree of \(size) events")
          }
          proof = LogProofs.json(
            try store.log.inclusionProof(position: LogPosition(seq), treeSize: size))
        case (nil, .some(let old)):
          guard old <= size else {
            throw CouchError.badRequest(
              "old_size \(old) is larger than the tree of \(size) events")
          }
          proof = LogProofs.consistencyJSON(
            oldSize: old, oldRoot: try store.log.treeRoot(size: old), newSize: size,
            newRoot: try store.log.treeRoot(size: size),
            path: try store.log.consistencyProof(oldSize: old, newSize: size))
        default:
          throw CouchError.badRequest(
            "give seq (an inclusion proof) or old_size (a consistency proof), not both")
        }
        if let signed, var members = proof.objectValue?.members {
          members.append(.init(key: "head", value: LogProofs.json(signed)))
          proof = .object(JSONObject(members))
        }
        return CouchResponse.json(proof, includeBody: !head)
      }
    } catch let error as LogError {
      if case .invalidArgument(let reason) = error { throw CouchError.badRequest(reason) }
      throw CouchError(StoreError.storage(error))
    }
  }

  private func nonNegative(_ query: QueryParameters, _ name: String) throws(CouchError)
    -> UInt64?
  {
    guard let text = query[name] else { return nil }
    guard let n = UInt64(text) else {
      throw CouchError.badRequest("\(name) must be a non-negative integer, got '\(text)'")
    }
    return n
  }
}
