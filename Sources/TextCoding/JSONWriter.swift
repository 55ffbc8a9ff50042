/// A minimal JSON object writer for output lines, jsonb values and push payloads: correct escaping,
/// keys in the order written, and no Foundation round trip per row. It works on UTF-8 bytes, which
/// is what makes a million-row plan or a hundred thousand payloads cheap.
public struct JSONWriter {
    private var bytes: [UInt8] = [UInt8(ascii: "{")]
    private var first = true

    public init() {
        bytes.reserveCapacity(256)
    }

    private mutating func key(_ name: String) {
        if !first { bytes.append(UInt8(ascii: ",")) }
        first = false
        JSONWriter.appendString(name, to: &bytes)
        bytes.append(UInt8(ascii: ":"))
    }

    public mutating func add(_ name: String, _ value: String?) {
        key(name)
        if let value { JSONWriter.appendString(value, to: &bytes) } else { bytes.append(contentsOf: "null".utf8) }
    }

    public mutating func add(_ name: String, _ value: Int) {
        key(name)
        bytes.append(contentsOf: String(value).utf8)
    }

    public mutating func add(_ name: String, _ value: Bool) {
        key(name)
        bytes.append(contentsOf: (value ? "true" : "false").utf8)
    }

    /// Adds already-serialized JSON (an object or array built by another writer).
    public mutating func add(_ name: String, json: String) {
        key(name)
        bytes.append(contentsOf: json.utf8)
    }

    /// Adds the object another writer built, without a round trip through `String`; nil adds `null`.
    public mutating func add(_ name: String, object: JSONWriter?) {
        key(name)
        guard let object else { bytes.append(contentsOf: "null".utf8); return }
        bytes.append(contentsOf: object.bytes)
        bytes.append(UInt8(ascii: "}"))
    }

    public mutating func add(_ name: String, strings: [String]) {
        key(name)
        bytes.append(UInt8(ascii: "["))
        for (i, s) in strings.enumerated() {
            if i > 0 { bytes.append(UInt8(ascii: ",")) }
            JSONWriter.appendString(s, to: &bytes)
        }
        bytes.append(UInt8(ascii: "]"))
    }

    /// The finished object as UTF-8 bytes.
    public var utf8: [UInt8] {
        var out = bytes
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// The finished object.
    public var json: String {
        var out = bytes
        out.append(UInt8(ascii: "}"))
        return String(decoding: out, as: UTF8.self)
    }

    private static let hex: [UInt8] = Array("0123456789abcdef".utf8)

    /// Appends `value` as a JSON string literal (RFC 8259 §7: quote, backslash and control characters escaped).
    public static func appendString(_ value: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var value = value
        value.withUTF8 { utf8 in
            var plainStart = 0
            for (index, byte) in utf8.enumerated() where byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") {
                out.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[plainStart..<index]))
                out.append(UInt8(ascii: "\\"))
                switch byte {
                case UInt8(ascii: "\""): out.append(UInt8(ascii: "\""))
                case UInt8(ascii: "\\"): out.append(UInt8(ascii: "\\"))
                case 0x0A: out.append(UInt8(ascii: "n"))
                case 0x0D: out.append(UInt8(ascii: "r"))
                case 0x09: out.append(UInt8(ascii: "t"))
                default:
                    out.append(contentsOf: "u00".utf8)
                    out.append(hex[Int(byte >> 4)])
                    out.append(hex[Int(byte & 0x0F)])
                }
                plainStart = index + 1
            }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[plainStart..<utf8.count]))
        }
        out.append(UInt8(ascii: "\""))
    }

    /// Appends `value` as a JSON string literal to a `String`.
    public static func appendString(_ value: String, to out: inout String) {
        out += string(value)
    }

    /// `value` as a JSON string literal.
    public static func string(_ value: String) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(value.utf8.count + 2)
        appendString(value, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }
}

extension JSONWriter {
    /// True while no member has been added.
    public var isEmpty: Bool { first }

    /// Appends every member another writer holds, in its order (an object's members spliced into this one).
    public mutating func append(members other: JSONWriter) {
        guard !other.first else { return }
        if !first { bytes.append(UInt8(ascii: ",")) }
        first = false
        bytes.append(contentsOf: other.bytes.dropFirst())
    }
}
