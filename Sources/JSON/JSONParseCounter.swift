import Synchronization

/// Counts the JSON texts parsed (`JSONValue(parsing:)`) by a task and the tasks it starts, for
/// tests that check how often a request's body is parsed.
///
/// ```swift
/// let counter = JSONParseCounter()
/// try await JSONParseCounter.$current.withValue(counter) { _ = try await handle(request) }
/// counter.parses  // 1
/// ```
package final class JSONParseCounter: Sendable {
  /// The counter of the calling task, if it has one.
  @TaskLocal package static var current: JSONParseCounter?

  let count = Atomic<Int>(0)

  package init() {}

  /// The texts parsed so far.
  package var parses: Int { count.load(ordering: .relaxed) }
}
