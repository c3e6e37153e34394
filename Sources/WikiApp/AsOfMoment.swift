import Formats
import Foundation
import HTTPTypes
import Log
import Projections

/// The moment a page is shown as of (`?as_of=`): a position of the log (an event's seq, as the
/// history lists them, or the last event at or before an ISO-8601 time) and when that event
/// was committed, when the reader may know it (the event is of a document they may read; else
/// the time asked, or no time).
///
/// Every link of an as-of page carries ``query`` (`?as_of=SEQ`, the position rather than the
/// time asked for, so that the page and its links show the same events), and the as-of bar
/// says the moment as a date and a time, with the event (``label``).
///
/// ```swift
/// let moment = try AsOfMoment(resolving: "2026-12-02T16:20:00Z", in: store)
/// moment.query   // "?as_of=28"
/// moment.label   // "<time class=\"exact\" ...>2 Dec 2026 16:19:58 UTC</time>, event 28"
/// ```
struct AsOfMoment: Sendable {
  /// The last event the view includes (``LogPosition/start`` for before the first one).
  let position: LogPosition
  /// When that event was committed (the time asked when the reader may not see the event;
  /// nil for ``LogPosition/start`` or when neither is known).
  let microseconds: Int64?

  /// `?as_of=SEQ`, for the links of an as-of page.
  var query: String { "?as_of=\(position.rawValue)" }

  /// `SEQ`, for a form's hidden field.
  var parameter: String { String(position.rawValue) }

  /// The moment for people, as HTML: "2 Dec 2026 16:20:05 UTC, event 28".
  var label: String {
    if position == .start { return "before the first event" }
    guard let microseconds else { return "event \(position.rawValue)" }
    return WikiSite.exactTime(microseconds) + ", event \(position.rawValue)"
  }

  /// The moment `text` names in `store`'s log: a seq no greater than its last position, or
  /// an ISO-8601 time (one before the first event is the empty wiki, one after the last the
  /// present).
  ///
  /// `visible` says whether the reader may read a document (by id): the commit time of an
  /// event of a document they may not read is not shown (the log's positions are shared by
  /// every wiki of the database).
  ///
  /// - Throws: ``WikiSite/Failure`` 400 for a value that is neither, or a seq past the log's
  ///   end, with what the log holds.
  init(resolving text: String, in store: DocumentStore, visible: (String) -> Bool) throws {
    let asked = text.trimmingCharacters(in: .whitespaces)
    let last = try store.read { try $0.lastPosition }
    var askedMicros: Int64? = nil
    // An event's number, or the database's sequence string for it (`update_seq`'s `N-…`).
    if let seq = store.position(ofOwnSequence: asked)?.rawValue {
      guard seq <= last.rawValue else {
        throw WikiSite.Failure(
          status: .badRequest,
          message:
            "There is no event \(seq) yet: this wiki database’s log runs from event 1 to event \(last.rawValue). Pick an event from a page’s history, or a time.",
          heading: "No such moment")
      }
      position = LogPosition(seq)
    } else if let date = ISO8601.parse(asked) {
      let micros = Int64((date.timeIntervalSince1970 * 1_000_000).rounded())
      askedMicros = micros
      position = try store.read { txn in
        guard micros < .max, let first = try txn.firstPosition(atOrAfterMicroseconds: micros + 1)
        else { return try txn.lastPosition }
        return LogPosition(first.rawValue - 1)
      }
    } else {
      throw WikiSite.Failure(
        status: .badRequest,
        message:
          "“\(asked.prefix(80))” is not a moment: as_of takes an event number, as a page’s history lists them (as_of=28), or a time (as_of=2026-12-02T16:20:00Z).",
        heading: "Not a moment")
    }
    let event = position == .start ? nil : try store.log.event(at: position)
    if let event, DocumentEvent.Kind(eventType: event.type) != nil, visible(event.stream) {
      microseconds = event.timestampMicroseconds
    } else {
      microseconds = position == .start ? nil : askedMicros
    }
  }
}
