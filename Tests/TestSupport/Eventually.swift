import Foundation

/// Checks `condition` every 20 ms until it holds or `seconds` pass; whether it held. A test
/// waits for a signal this way, never for a fixed time.
public func eventually(_ seconds: Double = 20, _ condition: () throws -> Bool) async throws
  -> Bool
{
  let end = Date().addingTimeInterval(seconds)
  while Date() < end {
    if try condition() { return true }
    try await Task.sleep(for: .milliseconds(20))
  }
  return try condition()
}

/// ``eventually(_:_:)`` for a condition that awaits (a request to a server, say).
public func eventually(_ seconds: Double = 20, _ condition: () async throws -> Bool) async throws
  -> Bool
{
  let end = Date().addingTimeInterval(seconds)
  while Date() < end {
    if try await condition() { return true }
    try await Task.sleep(for: .milliseconds(20))
  }
  return try await condition()
}
