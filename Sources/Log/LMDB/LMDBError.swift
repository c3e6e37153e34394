import CLMDB

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// A failed LMDB call: the return code and the operation that produced it.
///
/// Every return code from liblmdb goes through ``check(_:_:)`` so that no call site forgets one.
/// ``EventLog`` turns these into ``LogError`` values that say what to do.
struct LMDBError: Error, CustomStringConvertible {
  let code: Int32
  let operation: StaticString

  var description: String {
    let message = unsafe String(cString: mdb_strerror(code))
    return "\(operation): \(message) (\(code))"
  }

  static let notFound = MDB_NOTFOUND
  static let keyExists = MDB_KEYEXIST
  static let mapFull = MDB_MAP_FULL
  static let mapResized = MDB_MAP_RESIZED
  static let readersFull = MDB_READERS_FULL
  static let versionMismatch = MDB_VERSION_MISMATCH
  static let invalid = MDB_INVALID
  static let corrupted = MDB_CORRUPTED
  static let pageNotFound = MDB_PAGE_NOTFOUND
  static let panic = MDB_PANIC
  static let txnFull = MDB_TXN_FULL
  static let dbsFull = MDB_DBS_FULL
  static let badValueSize = MDB_BAD_VALSIZE
}

/// Sends an LMDB return code through one place; `MDB_SUCCESS` passes, anything else throws.
@inline(__always)
func check(_ rc: Int32, _ operation: StaticString = #function) throws(LMDBError) {
  guard rc == MDB_SUCCESS else { throw LMDBError(code: rc, operation: operation) }
}
