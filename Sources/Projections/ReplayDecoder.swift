import Dispatch
import JSON
import Log
import RevTree

/// Decodes events of a replay on a second thread, a batch ahead of the writer that applies them
/// (``DocumentStore/rebuildAll()``): decoding a document event and parsing its body are pure
/// functions of the event's bytes, so they can run while the writer's transaction applies the
/// previous batch. The events themselves are read by the writer, in its own transaction.
final class ReplayDecoder: Sendable {
  /// Events per batch: large enough that handing a batch over costs little per event, small
  /// enough that the writer soon has work.
  static let batchSize = 512

  /// One event with what decoding it gave.
  struct Prepared: Sendable {
    let event: RecordedEvent
    /// The document payload (nil for other events), or the error decoding it threw, which the
    /// writer throws when it reaches the event, as a replay without this decoder would.
    let decoded: Result<DocumentEvent?, StoreError>
    /// The parsed body of a live document revision, when bodies are parsed and it parses.
    let body: JSONValue?
    /// The change projections' shares of the event's revision (``Shares``).
    var shares: Shares = .none
  }

  /// A batch being decoded; ``wait()`` returns it once done.
  final class Batch: @unchecked Sendable {
    // Written by the decoding thread before `done` is signalled, read after `wait()`.
    fileprivate var prepared: [Prepared] = []
    fileprivate let done = DispatchSemaphore(value: 0)

    func wait() -> [Prepared] {
      done.wait()
      done.signal()  // a second wait returns at once
      return prepared
    }
  }

  private let queue = DispatchQueue(label: "wikilog.replay-decoder", qos: .userInitiated)
  private let parseBodies: Bool
  private let prepare: [PrepareShare?]

  /// `parseBodies`: whether projections after the documents take the parsed body
  /// (``DocumentChange/parsedBody``); the documents projection alone does not need it. `prepare`: the
  /// inline projections' ``DocumentChangeProjection/prepare(_:rev:body:)`` (nil for those
  /// that have none; empty when none has), whose shares are worked out here too.
  init(parseBodies: Bool, prepare: [PrepareShare?]) {
    self.parseBodies = parseBodies || !prepare.isEmpty
    self.prepare = prepare
  }

  /// Starts decoding `events` on the decoder's thread.
  func start(_ events: [RecordedEvent]) -> Batch {
    let batch = Batch()
    let parse = parseBodies
    let prepare = prepare
    queue.async {
      batch.prepared = events.map { Self.prepare($0, parseBody: parse, shares: prepare) }
      batch.done.signal()
    }
    return batch
  }

  static func prepare(
    _ event: RecordedEvent, parseBody: Bool,
    shares prepare: [PrepareShare?] = []
  ) -> Prepared {
    guard DocumentEvent.Kind(eventType: event.type) != nil else {
      return Prepared(event: event, decoded: .success(nil), body: nil)
    }
    let decoded: DocumentEvent
    do {
      decoded = try DocumentEvent(decoding: event)
    } catch {
      return Prepared(event: event, decoded: .failure(error), body: nil)
    }
    var body: JSONValue? = nil
    var shares = Shares.none
    if decoded.kind == .edit || decoded.kind == .replicated {
      if parseBody, !decoded.deleted {
        body = try? JSONValue(parsing: decoded.body)
      }
      if !prepare.isEmpty, let leaf = decoded.path?.leaf {
        shares = Shares.prepare(prepare, decoded.docID, leaf, body)
      }
    }
    return Prepared(event: event, decoded: .success(decoded), body: body, shares: shares)
  }
}
