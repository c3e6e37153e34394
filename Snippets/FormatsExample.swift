// Hex, Base64, varints and ISO-8601 times, as every module of wikilog writes them.
import Formats

print(Hex.encode([0xde, 0xad, 0xbe, 0xef]))  // deadbeef
print(Base64.encode(Array("wikilog".utf8)))  // d2lraWxvZw==
var bytes: [UInt8] = []
Varint.append(300, to: &bytes)
var at = 0
print(bytes, Varint.read(bytes, at: &at)!)  // [172, 2] 300
let micros = ISO8601.parseMicroseconds("2026-11-28T10:00:00.5+01:00")!
print(ISO8601.format(microseconds: micros, fractionDigits: 3))  // 2026-11-28T09:00:00.500Z
