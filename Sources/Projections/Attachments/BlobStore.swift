import Formats
import Foundation
import JSON
import RevTree

/// The attachment bytes of one database: content-addressed files beside its log,
/// `<database dir>/attachments/<hex MD5 of the stored bytes>`, each written once and shared by
/// every revision and document that has the same stored bytes.
///
/// A blob is written to a temporary file, flushed, renamed into place and its directory
/// flushed before the event that references it is appended, so an acknowledged revision never
/// names a missing blob; a crash (or a write refused after its blobs were written, a conflict
/// say) leaves at most an unreferenced blob or temporary file. No blob that an event of the log
/// names is ever deleted while its database exists: every revision stays readable. Compaction
/// removes what no event names once it is an hour old (``sweep(keeping:olderThan:)``; a write
/// that finds its blob already there touches it, so a blob about to be named again is never
/// that old); deleting the database removes its directory and the blobs with it.
///
/// MD5 names the blob because it is the digest CouchDB shows and puts in revision ids. Two
/// different contents with one MD5 (a deliberate collision) are not confused: a write whose
/// MD5 names a blob with other bytes is refused rather than deduplicated.
public struct BlobStore: Sendable {
  /// The `attachments` directory.
  public let path: String

  public init(path: String) {
    self.path = path
  }

  /// The blob store of the log in `databaseDirectory`.
  public init(databaseDirectory: String) {
    self.init(path: databaseDirectory + "/attachments")
  }

  /// A blob's file name: its MD5 in lowercase hexadecimal.
  public static func hex(_ md5: [UInt8]) -> String { Hex.encode(md5) }

  public func file(_ md5: [UInt8]) -> String { path + "/" + Self.hex(md5) }

  /// Removes the blob `md5` (nothing when there is none); true when a file was removed.
  @discardableResult
  public func remove(_ md5: [UInt8]) -> Bool {
    (try? FileManager.default.removeItem(atPath: file(md5))) != nil
  }

  /// Writes `bytes` (whose MD5 is `md5`) durably unless the same blob is there already: to a
  /// synced temporary file, then into place as ``install(_:md5:)`` does for an upload.
  public func write(_ bytes: [UInt8], md5: [UInt8]) throws(StoreError) {
    let target = file(md5)
    let fm = FileManager.default
    if fm.fileExists(atPath: target) {
      guard let existing = fm.contents(atPath: target), existing.elementsEqual(bytes) else {
        throw StoreError.internalError(
          "attachment blob \(Self.hex(md5)) exists with other bytes (an MD5 collision?)")
      }
      touch(target)
      return
    }
    let temporary = path + "/.tmp-" + UUID().uuidString
    do {
      try fm.createDirectory(atPath: path, withIntermediateDirectories: true)
      guard fm.createFile(atPath: temporary, contents: nil) else {
        throw StoreError.internalError("cannot create \(temporary)")
      }
      let handle = try FileHandle(forWritingAtPath: temporary).unwrap(temporary)
      defer { try? handle.close() }
      try handle.write(contentsOf: bytes)
      try handle.synchronize()
    } catch {
      try? fm.removeItem(atPath: temporary)
      if let error = error as? StoreError { throw error }
      throw StoreError.internalError("cannot write attachment blob \(Self.hex(md5)): \(error)")
    }
    try install(temporary, md5: md5)
  }

  /// The stored bytes of blob `md5`; `internal_server_error` when it is missing.
  public func read(_ md5: [UInt8]) throws(StoreError) -> [UInt8] {
    guard let data = FileManager.default.contents(atPath: file(md5)) else {
      throw StoreError.internalError("attachment blob \(Self.hex(md5)) is missing")
    }
    return [UInt8](data)
  }

  /// Whether blob `md5` is there.
  public func exists(_ md5: [UInt8]) -> Bool {
    FileManager.default.fileExists(atPath: file(md5))
  }

  /// Blob `md5` opened for reading in pieces; `internal_server_error` when it is missing.
  public func open(_ md5: [UInt8]) throws(StoreError) -> BlobReader {
    guard let handle = FileHandle(forReadingAtPath: file(md5)) else {
      throw StoreError.internalError("attachment blob \(Self.hex(md5)) is missing")
    }
    return BlobReader(handle: handle, name: Self.hex(md5))
  }

  /// A blob written from chunks (``BlobUpload``), to a temporary file in this directory.
  public func upload(gzip: Bool) throws(StoreError) -> BlobUpload {
    try BlobUpload(store: self, gzip: gzip)
  }

  /// Moves the synced temporary file `temporary` (whose bytes have MD5 `md5`) into place as
  /// blob `md5`, or removes it when that blob is there already with the same bytes, then
  /// flushes the directory.
  func install(_ temporary: String, md5: [UInt8]) throws(StoreError) {
    let target = file(md5)
    let fm = FileManager.default
    do {
      if fm.fileExists(atPath: target) {
        defer { try? fm.removeItem(atPath: temporary) }
        guard try Self.sameContents(temporary, target) else {
          throw StoreError.internalError(
            "attachment blob \(Self.hex(md5)) exists with other bytes (an MD5 collision?)")
        }
        touch(target)
        return
      }
      do {
        try fm.moveItem(atPath: temporary, toPath: target)
      } catch {
        // Another writer put the same blob in place meanwhile.
        try? fm.removeItem(atPath: temporary)
        guard fm.fileExists(atPath: target) else { throw error }
      }
      let directory = try FileHandle(forReadingAtPath: path).unwrap(path)
      defer { try? directory.close() }
      try directory.synchronize()
    } catch let error as StoreError {
      throw error
    } catch {
      throw StoreError.internalError("cannot write attachment blob \(Self.hex(md5)): \(error)")
    }
  }

  /// Marks a blob reused now, so that a sweep (which spares recent files) leaves it to the
  /// event about to name it.
  func touch(_ file: String) {
    try? FileManager.default.setAttributes([.modificationDate: Date()], ofItemAtPath: file)
  }

  /// What a sweep removed, or (``unreferenced(keeping:olderThan:)``) would remove.
  public struct Sweep: Sendable, Hashable {
    /// Blobs no event names, and temporary files left by uploads that never finished.
    public var files = 0
    public var bytes = 0

    public init(files: Int = 0, bytes: Int = 0) {
      self.files = files
      self.bytes = bytes
    }
  }

  /// Removes the blobs not in `referenced` and the temporary files, each only when unchanged
  /// for `age` seconds: a blob is in place before the event that names it is appended, and an
  /// upload writes to its temporary file as it goes, so a recent file may still be about to be
  /// named. The directory is flushed after.
  public func sweep(keeping referenced: Set<[UInt8]>, olderThan age: Double = 3600)
    throws(StoreError) -> Sweep
  {
    let fm = FileManager.default
    var done = Sweep()
    for (name, size) in candidates(keeping: referenced, olderThan: age) {
      if (try? fm.removeItem(atPath: path + "/" + name)) != nil {
        done.files += 1
        done.bytes += size
      }
    }
    if done.files > 0, let directory = FileHandle(forReadingAtPath: path) {
      try? directory.synchronize()
      try? directory.close()
    }
    return done
  }

  /// What ``sweep(keeping:olderThan:)`` would remove, without removing it.
  public func unreferenced(keeping referenced: Set<[UInt8]>, olderThan age: Double = 3600)
    -> Sweep
  {
    candidates(keeping: referenced, olderThan: age).reduce(into: Sweep()) {
      $0.files += 1
      $0.bytes += $1.size
    }
  }

  private func candidates(keeping referenced: Set<[UInt8]>, olderThan age: Double)
    -> [(name: String, size: Int)]
  {
    let fm = FileManager.default
    guard let names = try? fm.contentsOfDirectory(atPath: path) else { return [] }
    let cutoff = Date().addingTimeInterval(-age)
    var out: [(name: String, size: Int)] = []
    for name in names {
      let isTemporary = name.hasPrefix(".tmp-")
      if !isTemporary {
        guard name.utf8.count == 32, let md5 = Hex.decode(name), md5.count == 16,
          !referenced.contains(md5)
        else { continue }
      }
      guard let attributes = try? fm.attributesOfItem(atPath: path + "/" + name),
        attributes[.type] as? FileAttributeType == .typeRegular,
        let modified = attributes[.modificationDate] as? Date, modified < cutoff
      else { continue }
      out.append((name, attributes[.size] as? Int ?? 0))
    }
    return out
  }

  /// Whether files `a` and `b` hold the same bytes, compared a megabyte at a time.
  static func sameContents(_ a: String, _ b: String) throws -> Bool {
    let fm = FileManager.default
    let sizeA = try fm.attributesOfItem(atPath: a)[.size] as? Int
    let sizeB = try fm.attributesOfItem(atPath: b)[.size] as? Int
    guard sizeA == sizeB else { return false }
    let ha = try FileHandle(forReadingAtPath: a).unwrap(a)
    defer { try? ha.close() }
    let hb = try FileHandle(forReadingAtPath: b).unwrap(b)
    defer { try? hb.close() }
    while true {
      let x = try ha.read(upToCount: 1 << 20) ?? Data()
      let y = try hb.read(upToCount: 1 << 20) ?? Data()
      guard x == y else { return false }
      if x.isEmpty { return true }
    }
  }
}

/// A blob being read a piece at a time (``BlobStore/open(_:)``), for sending an attachment
/// without holding it in memory. Used by one task at a time; closed when released.
public final class BlobReader: @unchecked Sendable {
  private let handle: FileHandle
  private let name: String

  init(handle: FileHandle, name: String) {
    self.handle = handle
    self.name = name
  }

  deinit { try? handle.close() }

  /// Moves to byte `offset`.
  public func seek(to offset: Int) throws(StoreError) {
    do {
      try handle.seek(toOffset: UInt64(offset))
    } catch {
      throw StoreError.internalError("cannot read attachment blob \(name): \(error)")
    }
  }

  /// Up to `count` next bytes; empty at the end.
  public func read(upTo count: Int) throws(StoreError) -> [UInt8] {
    do {
      guard let data = try handle.read(upToCount: count) else { return [] }
      return [UInt8](data)
    } catch {
      throw StoreError.internalError("cannot read attachment blob \(name): \(error)")
    }
  }
}

/// A blob written as its bytes arrive (`PUT /db/doc/att`), with bounded memory: each chunk
/// goes to a temporary file in the blob directory (gzipped first, with CouchDB's settings,
/// when `gzip`), and the MD5s of the bytes received and of the bytes stored are kept as it
/// goes. ``finish(expectingMD5:)`` syncs the file and moves it into place as its blob (or
/// drops it when the blob is there), so that, as with ``BlobStore/write(_:md5:)``, the blob is
/// durable before an event names it. ``discard()`` (or an error in ``write(_:)`` or
/// ``finish(expectingMD5:)``) removes the temporary file: an upload that does not finish
/// leaves nothing behind (a crash mid-upload leaves a `.tmp-` file no event names).
///
/// Used by one task at a time (the request that uploads), so not locked.
public final class BlobUpload: @unchecked Sendable {
  /// What a finished upload stored.
  public struct Result: Sendable {
    /// The MD5 of the bytes stored: the blob's name and the digest.
    public var md5: [UInt8]
    /// The MD5 of the bytes received (equal to ``md5`` when stored as received).
    public var receivedMD5: [UInt8]
    /// How many bytes were received.
    public var receivedLength: Int
    /// How many bytes were stored.
    public var storedLength: Int
  }

  private let store: BlobStore
  private let temporary: String
  private var handle: FileHandle?
  private var encoder: GzipEncoder?
  /// The MD5 of the bytes received, in a box that ``hashing`` updates while this thread writes
  /// (``write(_:)``).
  private let received = HashBox()
  /// Where an identity upload's MD5 runs, a chunk after another, behind the writes: MD5 is
  /// most of an upload's work, so it runs on without waiting for each chunk's write, at most
  /// ``hashAhead`` chunks behind.
  private let hashing = DispatchQueue(label: "wikilog.blob-md5")
  private let hashAhead = DispatchSemaphore(value: 4)
  private var stored = BulkMD5()
  private let gzip: Bool
  /// How many bytes were received so far.
  public private(set) var receivedLength = 0
  private var storedLength = 0
  private var unsynced = 0
  /// How many bytes are written between flushes of the temporary file.
  static let syncInterval = 16 << 20
  /// The flushes made while the upload goes on (``append(_:)``), on a thread of their own.
  private let flusher = BackgroundFlush()

  init(store: BlobStore, gzip: Bool) throws(StoreError) {
    self.store = store
    self.gzip = gzip
    temporary = store.path + "/.tmp-" + UUID().uuidString
    let fm = FileManager.default
    do {
      try fm.createDirectory(atPath: store.path, withIntermediateDirectories: true)
    } catch {
      throw StoreError.internalError("cannot create \(store.path): \(error)")
    }
    guard fm.createFile(atPath: temporary, contents: nil),
      let handle = FileHandle(forWritingAtPath: temporary)
    else { throw StoreError.internalError("cannot create \(temporary)") }
    self.handle = handle
    if gzip { encoder = GzipEncoder() }
  }

  deinit {
    if handle != nil { discard() }
  }

  /// Adds `chunk` of the data.
  public func write(_ chunk: [UInt8]) throws(StoreError) {
    guard handle != nil else { throw StoreError.internalError("the upload is closed") }
    receivedLength += chunk.count
    if gzip {
      received.md5.update(chunk)
      let out = encoder!.update(chunk)
      try append(out)
    } else {
      // The MD5 (most of an upload's time) runs on its own queue while this thread writes the
      // same bytes to the file and takes the next chunk.
      let box = received
      let ahead = hashAhead
      ahead.wait()
      hashing.async {
        box.md5.update(chunk)
        ahead.signal()
      }
      try append(chunk)
    }
  }

  private func append(_ bytes: [UInt8]) throws(StoreError) {
    guard !bytes.isEmpty, let handle else { return }
    if gzip { stored.update(bytes) }
    storedLength += bytes.count
    do {
      try handle.write(contentsOf: bytes)
      unsynced += bytes.count
      if unsynced >= Self.syncInterval {
        // Flushed as it goes, so the flush before the rename has little left to do; on
        // another thread, so the writes do not wait for the disk meanwhile.
        flusher.start(handle.fileDescriptor)
        unsynced = 0
      }
    } catch {
      discard()
      throw StoreError.internalError("cannot write \(temporary): \(error)")
    }
  }

  /// Ends the data: syncs the file and puts it in place as its blob. With `expectingMD5`
  /// (a `Content-MD5`), data of another MD5 is `400 content_md5_mismatch` and nothing is kept.
  public func finish(expectingMD5: [UInt8]? = nil) throws(StoreError) -> Result {
    guard let handle else { throw StoreError.internalError("the upload is closed") }
    if gzip, let encoder = encoder.take() {
      try append(encoder.finish())
    }
    hashing.sync {}
    let receivedMD5 = received.md5.finalize()
    let md5 = gzip ? stored.finalize() : receivedMD5
    if let expectingMD5, expectingMD5 != receivedMD5 {
      discard()
      throw StoreError("content_md5_mismatch", "Possible message corruption.", code: .badRequest)
    }
    do {
      if let failed = flusher.wait() { throw failed }
      try handle.synchronize()
      try handle.close()
    } catch {
      discard()
      throw StoreError.internalError("cannot write \(temporary): \(error)")
    }
    self.handle = nil
    do throws(StoreError) {
      try store.install(temporary, md5: md5)
    } catch {
      try? FileManager.default.removeItem(atPath: temporary)
      throw error
    }
    return Result(
      md5: md5, receivedMD5: receivedMD5, receivedLength: receivedLength,
      storedLength: storedLength)
  }

  /// Abandons the upload: closes and removes the temporary file.
  public func discard() {
    hashing.sync {}
    if let handle {
      // A flush still running holds the file's descriptor.
      _ = flusher.wait()
      try? handle.close()
      self.handle = nil
    }
    try? FileManager.default.removeItem(atPath: temporary)
  }
}

extension Optional {
  fileprivate func unwrap(_ path: String) throws(StoreError) -> Wrapped {
    guard let self else { throw StoreError.internalError("cannot open \(path)") }
    return self
  }
}

/// An MD5 that one thread at a time updates (``BlobUpload``'s serial hashing queue; the
/// upload reads it only after waiting for that queue).
final class HashBox: @unchecked Sendable {
  var md5 = BulkMD5()
}

/// The flushes of an upload's temporary file while it is written: `fsync` on a thread of its
/// own, at most one at a time (one asked for while another runs is dropped: the flush at the
/// end covers what it would have). The first failure is kept for ``wait()``.
final class BackgroundFlush: @unchecked Sendable {
  private let queue = DispatchQueue(label: "wikilog.blob-flush")
  private let lock = NSLock()
  private var running = false
  private var failure: (any Error)?

  /// Starts flushing `descriptor` unless a flush is running.
  func start(_ descriptor: Int32) {
    lock.lock()
    defer { lock.unlock() }
    guard !running else { return }
    running = true
    queue.async { [self] in
      let result = fsync(descriptor)
      let code = errno
      lock.lock()
      if result != 0 && failure == nil {
        failure = POSIXError(POSIXErrorCode(rawValue: code) ?? .EIO)
      }
      running = false
      lock.unlock()
    }
  }

  /// Waits for the flush running, if any; the first flush's failure, if one failed.
  func wait() -> (any Error)? {
    queue.sync {}
    lock.lock()
    defer { lock.unlock() }
    return failure
  }
}
