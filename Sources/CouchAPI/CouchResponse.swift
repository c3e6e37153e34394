public import HTTPTypes
public import Hummingbird
public import JSON
import NIOCore
import RevTree

/// Builds the responses the server sends: JSON bodies with CouchDB's headers.
public enum CouchResponse {
  /// A JSON response (`Content-Type: application/json`, `Cache-Control: must-revalidate`).
  public static func json(
    _ value: JSONValue, status: HTTPResponse.Status = .ok, includeBody: Bool = true,
    headers: HTTPFields = [:]
  ) -> Response {
    var bytes = value.serialized()
    bytes.append(UInt8(ascii: "\n"))
    return raw(bytes, status: status, includeBody: includeBody, headers: headers)
  }

  /// A response whose JSON text is already serialized.
  public static func raw(
    _ bytes: [UInt8], status: HTTPResponse.Status = .ok, includeBody: Bool = true,
    headers: HTTPFields = [:]
  ) -> Response {
    var fields = headers
    fields[.contentType] = "application/json"
    fields[.cacheControl] = "must-revalidate"
    if !includeBody {
      fields[.contentLength] = String(bytes.count)
      return Response(status: status, headers: fields, body: ResponseBody())
    }
    return Response(
      status: status, headers: fields, body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes)))
  }

  /// `{"ok":true}`.
  public static func ok(status: HTTPResponse.Status = .ok) -> Response {
    json(.object(JSONObject(["ok": .bool(true)])), status: status)
  }
}
