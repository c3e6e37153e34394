/// Where a stream stands: how many events it has and where its last one is.
struct StreamHead: Hashable, Sendable {
  var version: UInt64
  var last: UInt64
}
