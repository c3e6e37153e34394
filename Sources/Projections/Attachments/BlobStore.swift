import Foundation

/// The attachment bytes of one database: content-addressed files beside its log,
/// `<database dir>/attachments/<hex MD5 of the stored bytes>`, each written once and shared by
/// every revision and document that has the same stored bytes.
///
/// A blob is written to a temporary file, flushed, renamed into place and its directory
/// flushed before the event that references it is appended, so an acknowledged revision never
/// names a missing blob; a crash (or a write refused after its blobs were written, a conflict
/// say) leaves at most an unreferenced blob. Nothing deletes a blob while its database exists:
/// every revision stays readable. Compaction rewrites `data.mdb` only, so blobs are kept;
/// deleting the database removes its directory and them with it.
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

  public static func hex(_ md5: [UInt8]) -> String {
    let digits = Array("0123456789abcdef".utf8)
    var out: [UInt8] = []
    out.reserveCapacity(md5.count * 2)
    for b in md5 {
      out.append(digits[Int(b >> 4)])
      out.append(digits[Int(b & 15)])
    }
    return String(decoding: out, as: UTF8.self)
  }

  public func file(_ md5: [UInt8]) -> String { path + "/" + Self.hex(md5) }

  /// Writes `bytes` (whose MD5 is `md5`) durably unless the same blob is there already.
  public func write(_ bytes: [UInt8], md5: [UInt8]) throws(StoreError) {
    let target = file(md5)
    let fm = FileManager.default
    if fm.fileExists(atPath: target) {
      guard let existing = fm.contents(atPath: target), existing.elementsEqual(bytes) else {
        throw StoreError.internalError(
          "attachment blob \(Self.hex(md5)) exists with other bytes (an MD5 collision?)")
      }
      return
    }
    do {
      try fm.createDirectory(atPath: path, withIntermediateDirectories: true)
      let temporary = path + "/.tmp-" + UUID().uuidString
      guard fm.createFile(atPath: temporary, contents: nil) else {
        throw StoreError.internalError("cannot create \(temporary)")
      }
      do {
        let handle = try FileHandle(forWritingAtPath: temporary).unwrap(temporary)
        defer { try? handle.close() }
        try handle.write(contentsOf: bytes)
        try handle.synchronize()
      } catch {
        try? fm.removeItem(atPath: temporary)
        throw error
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
}

extension Optional {
  fileprivate func unwrap(_ path: String) throws(StoreError) -> Wrapped {
    guard let self else { throw StoreError.internalError("cannot open \(path)") }
    return self
  }
}
