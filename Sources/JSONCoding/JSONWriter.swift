/// A minimal JSON object writer for output lines and jsonb values: correct escaping, keys in the
/// order written, no Foundation round trip per row.
public struct JSONWriter {
    public private(set) var text = "{"
    private var first = true

    public init() {}

    private mutating func key(_ name: String) {
        if !first { text += "," }
        first = false
        JSONWriter.appendString(name, to: &text)
        text += ":"
    }

    public mutating func add(_ name: String, _ value: String?) {
        key(name)
        if let value { JSONWriter.appendString(value, to: &text) } else { text += "null" }
    }

    public mutating func add(_ name: String, _ value: Int) {
        key(name)
        text += String(value)
    }

    public mutating func add(_ name: String, _ value: Bool) {
        key(name)
        text += value ? "true" : "false"
    }

    /// Adds already-serialized JSON (an object or array built by another writer).
    public mutating func add(_ name: String, json: String) {
        key(name)
        text += json
    }

    public mutating func add(_ name: String, strings: [String]) {
        key(name)
        text += "["
        for (i, s) in strings.enumerated() {
            if i > 0 { text += "," }
            JSONWriter.appendString(s, to: &text)
        }
        text += "]"
    }

    /// The finished object.
    public var json: String { text + "}" }

    /// Appends `value` as a JSON string literal.
    public static func appendString(_ value: String, to out: inout String) {
        out += "\""
        var plainStart = value.unicodeScalars.startIndex
        var index = plainStart
        let scalars = value.unicodeScalars
        while index != scalars.endIndex {
            let c = scalars[index]
            let escape: String?
            switch c {
            case "\"": escape = "\\\""
            case "\\": escape = "\\\\"
            case "\n": escape = "\\n"
            case "\r": escape = "\\r"
            case "\t": escape = "\\t"
            case "\u{2028}": escape = "\\u2028"
            case "\u{2029}": escape = "\\u2029"
            default:
                if c.value < 0x20 {
                    let hex = String(c.value, radix: 16)
                    escape = "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    escape = nil
                }
            }
            if let escape {
                out.unicodeScalars.append(contentsOf: scalars[plainStart..<index])
                out += escape
                plainStart = scalars.index(after: index)
            }
            index = scalars.index(after: index)
        }
        out.unicodeScalars.append(contentsOf: scalars[plainStart..<scalars.endIndex])
        out += "\""
    }

    /// `value` as a JSON string literal.
    public static func string(_ value: String) -> String {
        var out = ""
        appendString(value, to: &out)
        return out
    }
}
