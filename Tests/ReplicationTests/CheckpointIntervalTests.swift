import CouchAPI
import CouchTestSupport
import Foundation
import Hummingbird
import HummingbirdTesting
import JSON
import Projections
import Replication
import Testing

/// Checkpoints every ``ReplicationOptions/checkpointInterval``, at the end, and whenever a run
/// stops with batches written since the last one.
@Suite struct CheckpointIntervalTests {
  /// A source whose `_changes` says more is pending than there is (as a sharded CouchDB's
  /// estimate or a filtered feed can), so the last batch written is not known to be the last.
  struct OverstatedPending: CouchTransport {
    let inner: any CouchTransport
    func send(_ method: String, _ path: String, body: [UInt8]?) async throws
      -> CouchTransportResponse
    {
      var response = try await inner.send(method, path, body: body)
      if path.contains("/_changes"),
        case .object(var object)? = try? JSONValue(parsing: response.body)
      {
        object["pending"] = .int(1_000)
        response.body = JSONValue.object(object).serialized()
      }
      return response
    }
  }

  /// The checkpointed seqs a run reported, in order.
  final class Checkpoints: @unchecked Sendable {
    private let lock = NSLock()
    private var seqs: [JSONValue] = []
    func saw(_ status: ReplicationStatus) {
      lock.withLock {
        if let seq = status.checkpointedSeq, seqs.last != seq { seqs.append(seq) }
      }
    }
    /// Those after the run's start.
    func written(after start: JSONValue) -> [JSONValue] {
      lock.withLock { seqs.filter { $0 != start } }
    }
  }

  @Test(
    "with checkpoints every 30 s, a one-shot run still checkpoints its last batch, also when the source overstated what was pending; 0 checkpoints every batch"
  )
  func lastBatchCheckpointed() async throws {
    let a = TestDirectory("checkpoint-interval-a")
    let b = TestDirectory("checkpoint-interval-b")
    let source = try a.data.create("src")
    let target = try b.data.create("dst")
    for i in 0..<25 { try source.put(#"{"n":\#(i)}"#, id: "d\(i)", actor: "alice") }
    try await ReplicationRobustnessTests.live(a).test(.live) { clientA in
      try await ReplicationRobustnessTests.live(b).test(.live) { clientB in
        let plain = HTTPClientTransport(baseURL: "http://127.0.0.1:\(try #require(clientA.port))")
        let src = CouchEndpoint(
          transport: OverstatedPending(inner: plain), database: "src", identity: "a/src")
        let dst = CouchEndpoint(
          transport: HTTPClientTransport(baseURL: "http://127.0.0.1:\(try #require(clientB.port))"),
          database: "dst", identity: "b/dst")
        var options = ReplicationOptions()
        options.batchSize = 4
        #expect(options.checkpointInterval == .seconds(30))
        let first = Checkpoints()
        let report = try await Replicator(source: src, target: dst, options: options).replicate {
          first.saw($0)
        }
        #expect(report.docsWritten == 25)
        // Seven batches, one checkpoint: the one owed when the empty batch ended the run.
        #expect(first.written(after: report.startSeq) == [report.endSeq])
        let id = Replicator(source: src, target: dst, options: options).replicationID
        #expect(try source.getLocal(id)["source_last_seq"] == report.endSeq)
        #expect(try target.getLocal(id)["source_last_seq"] == report.endSeq)
        // The next run starts there and reads nothing.
        let again = try await Replicator(source: src, target: dst, options: options).replicate()
        #expect(again.startSeq == report.endSeq && again.docsRead == 0)

        // Every batch, with an interval of 0.
        for i in 25..<37 { try source.put(#"{"n":\#(i)}"#, id: "d\(i)", actor: "alice") }
        options.checkpointInterval = .zero
        let second = Checkpoints()
        let each = try await Replicator(source: src, target: dst, options: options).replicate {
          second.saw($0)
        }
        #expect(each.docsWritten == 12)
        #expect(second.written(after: each.startSeq).count == 3)
      }
    }
  }
}
