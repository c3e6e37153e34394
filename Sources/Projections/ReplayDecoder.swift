import Dispatch
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
    /// What the event's revision makes of the wiki projection's row if it wins, when the
    /// store has that projection (``AppendFacts/wiki``).
    var wiki: WikiProjection.Prepared? = nil
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
  private let prepareWiki: Bool

  /// `parseBodies`: whether projections after the documents take the parsed body
  /// (``AppendFacts/body``); the documents projection alone does not need it. `prepareWiki`:
  /// whether the store has a ``WikiProjection``, whose share is then worked out here too.
  init(parseBodies: Bool, prepareWiki: Bool) {
    self.parseBodies = parseBodies || prepareWiki
    self.prepareWiki = prepareWiki
  }

  /// Starts decoding `events` on the decoder's thread.
  func start(_ events: [RecordedEvent]) -> Batch {
    let batch = Batch()
    let parse = parseBodies
    let wiki = prepareWiki
    queue.async {
      batch.prepared = events.map { Self.prepare($0, parseBody: parse, prepareWiki: wiki) }
      batch.done.signal()
    }
    return batch
  }

  static func prepare(_ event: RecordedEvent, parseBody: Bool, prepareWiki: Bool = false)
    -> Prepared
  {
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
    var wiki: WikiProjection.Prepared? = nil
    if decoded.kind == .edit || decoded.kind == .replicated {
      if parseBody, !decoded.deleted {
        body = try? JSONValue(parsing: decoded.body)
      }
      if prepareWiki, let leaf = decoded.path?.leaf {
        wiki = WikiProjection.prepare(decoded.docID, rev: leaf.description, body: body)
      }
    }
    return Prepared(event: event, decoded: .success(decoded), body: body, wiki: wiki)
  }
}
