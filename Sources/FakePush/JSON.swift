import Foundation

/// A JSON value that keeps object members in the order they were written and numbers as their source
/// text. FCM's errors name map entries by position (`message.data[0].value`) and quote the offending
/// value as written (`(TYPE_STRING), 12`), which Foundation's `JSONSerialization` cannot give back.
enum JSONValue: Sendable, Equatable {
    case object([JSONMember])
    case array([JSONValue])
    case string(String)
    /// A number, as its JSON text (`12`, `-1.5e3`).
    case number(String)
    case bool(Bool)
    case null

    /// The first member named `key`, when this is an object.
    subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members.first { $0.key == key }?.value
    }

    var stringValue: String? {
        if case .string(let string) = self { return string }
        return nil
    }

    var members: [JSONMember]? {
        if case .object(let members) = self { return members }
        return nil
    }

    var isObject: Bool {
        if case .object = self { return true }
        return false
    }

    /// The value as compact JSON text.
    var jsonText: String {
        var output = ""
        JSONValue.write(self, into: &output, indent: nil, level: 0)
        return output
    }

    /// The value as Google's APIs print it: two-space indentation, `"key": value`, a final newline.
    var googleStyleText: String {
        var output = ""
        JSONValue.write(self, into: &output, indent: "  ", level: 0)
        output += "\n"
        return output
    }

    private static func write(_ value: JSONValue, into output: inout String, indent: String?, level: Int) {
        switch value {
        case .null: output += "null"
        case .bool(let flag): output += flag ? "true" : "false"
        case .number(let text): output += text
        case .string(let string): output += quoted(string)
        case .array(let elements):
            if elements.isEmpty { output += "[]"; return }
            output += "["
            for (index, element) in elements.enumerated() {
                if index > 0 { output += "," }
                newline(&output, indent, level + 1)
                write(element, into: &output, indent: indent, level: level + 1)
            }
            newline(&output, indent, level)
            output += "]"
        case .object(let members):
            if members.isEmpty { output += "{}"; return }
            output += "{"
            for (index, member) in members.enumerated() {
                if index > 0 { output += "," }
                newline(&output, indent, level + 1)
                output += quoted(member.key)
                output += indent == nil ? ":" : ": "
                write(member.value, into: &output, indent: indent, level: level + 1)
            }
            newline(&output, indent, level)
            output += "}"
        }
    }

    private static func newline(_ output: inout String, _ indent: String?, _ level: Int) {
        guard let indent else { return }
        output += "\n"
        for _ in 0..<level { output += indent }
    }

    /// `string` as a JSON string literal.
    static func quoted(_ string: String) -> String {
        var output = "\""
        for scalar in string.unicodeScalars {
            switch scalar {
            case "\"": output += "\\\""
            case "\\": output += "\\\\"
            case "\n": output += "\\n"
            case "\r": output += "\\r"
            case "\t": output += "\\t"
            case let control where control.value < 0x20:
                output += "\\u" + String(repeating: "0", count: 4 - String(control.value, radix: 16).count)
                    + String(control.value, radix: 16)
            default: output.unicodeScalars.append(scalar)
            }
        }
        output += "\""
        return output
    }
}

/// One `"key": value` pair of a JSON object.
struct JSONMember: Sendable, Equatable {
    var key: String
    var value: JSONValue

    init(_ key: String, _ value: JSONValue) {
        self.key = key
        self.value = value
    }
}

/// Why a body is not JSON.
struct JSONSyntaxError: Error, Equatable {
    var offset: Int
}

/// A strict RFC 8259 parser over raw bytes (no trailing commas, no comments, one top-level value).
struct JSONParser {
    private let bytes: UnsafeRawBufferPointer
    private var index = 0
    private var depth = 0
    private static let maximumDepth = 100

    private init(bytes: UnsafeRawBufferPointer) {
        self.bytes = bytes
    }

    /// Parses `bytes` as one JSON document.
    static func parse(_ bytes: UnsafeRawBufferPointer) throws(JSONSyntaxError) -> JSONValue {
        var parser = JSONParser(bytes: bytes)
        parser.skipWhitespace()
        let value = try parser.parseValue()
        parser.skipWhitespace()
        guard parser.index == bytes.count else { throw JSONSyntaxError(offset: parser.index) }
        return value
    }

    /// Parses a byte array as one JSON document.
    static func parse(_ bytes: [UInt8]) throws(JSONSyntaxError) -> JSONValue {
        do {
            return try bytes.withUnsafeBytes { try parse($0) }
        } catch let error as JSONSyntaxError {
            throw error
        } catch {
            throw JSONSyntaxError(offset: 0)
        }
    }

    private var current: UInt8? { index < bytes.count ? bytes[index] : nil }

    private mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    private func fail() -> JSONSyntaxError { JSONSyntaxError(offset: index) }

    private mutating func parseValue() throws(JSONSyntaxError) -> JSONValue {
        guard let byte = current else { throw fail() }
        switch byte {
        case UInt8(ascii: "{"): return try parseObject()
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try expectLiteral("true"); return .bool(true)
        case UInt8(ascii: "f"): try expectLiteral("false"); return .bool(false)
        case UInt8(ascii: "n"): try expectLiteral("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try parseNumber())
        default: throw fail()
        }
    }

    private mutating func expectLiteral(_ literal: StaticString) throws(JSONSyntaxError) {
        let count = literal.utf8CodeUnitCount
        guard index + count <= bytes.count else { throw fail() }
        let start = literal.utf8Start
        for offset in 0..<count where bytes[index + offset] != start[offset] { throw fail() }
        index += count
    }

    private mutating func parseObject() throws(JSONSyntaxError) -> JSONValue {
        depth += 1
        guard depth <= Self.maximumDepth else { throw fail() }
        defer { depth -= 1 }
        index += 1
        var members: [JSONMember] = []
        skipWhitespace()
        if current == UInt8(ascii: "}") { index += 1; return .object(members) }
        while true {
            skipWhitespace()
            guard current == UInt8(ascii: "\"") else { throw fail() }
            let key = try parseString()
            skipWhitespace()
            guard current == UInt8(ascii: ":") else { throw fail() }
            index += 1
            skipWhitespace()
            let value = try parseValue()
            members.append(JSONMember(key, value))
            skipWhitespace()
            switch current {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "}"): index += 1; return .object(members)
            default: throw fail()
            }
        }
    }

    private mutating func parseArray() throws(JSONSyntaxError) -> JSONValue {
        depth += 1
        guard depth <= Self.maximumDepth else { throw fail() }
        defer { depth -= 1 }
        index += 1
        var elements: [JSONValue] = []
        skipWhitespace()
        if current == UInt8(ascii: "]") { index += 1; return .array(elements) }
        while true {
            skipWhitespace()
            elements.append(try parseValue())
            skipWhitespace()
            switch current {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "]"): index += 1; return .array(elements)
            default: throw fail()
            }
        }
    }

    private mutating func parseNumber() throws(JSONSyntaxError) -> String {
        let start = index
        if current == UInt8(ascii: "-") { index += 1 }
        guard let first = current, isDigit(first) else { throw fail() }
        index += 1
        if first != UInt8(ascii: "0") { skipDigits() }
        if current == UInt8(ascii: ".") {
            index += 1
            guard let digit = current, isDigit(digit) else { throw fail() }
            skipDigits()
        }
        if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
            index += 1
            if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { index += 1 }
            guard let digit = current, isDigit(digit) else { throw fail() }
            skipDigits()
        }
        return String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
    }

    private func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

    private mutating func skipDigits() {
        while let byte = current, isDigit(byte) { index += 1 }
    }

    private mutating func parseString() throws(JSONSyntaxError) -> String {
        index += 1  // opening quote
        let start = index
        // Fast path: no escapes.
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let string = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
                index += 1
                return string
            }
            if byte == UInt8(ascii: "\\") { break }
            if byte < 0x20 { throw fail() }
            index += 1
        }
        guard index < bytes.count else { throw fail() }
        var utf8 = [UInt8](UnsafeRawBufferPointer(rebasing: bytes[start..<index]))
        while true {
            guard let byte = current else { throw fail() }
            index += 1
            switch byte {
            case UInt8(ascii: "\""):
                return String(decoding: utf8, as: UTF8.self)
            case UInt8(ascii: "\\"):
                guard let escaped = current else { throw fail() }
                index += 1
                switch escaped {
                case UInt8(ascii: "\""): utf8.append(0x22)
                case UInt8(ascii: "\\"): utf8.append(0x5C)
                case UInt8(ascii: "/"): utf8.append(0x2F)
                case UInt8(ascii: "b"): utf8.append(0x08)
                case UInt8(ascii: "f"): utf8.append(0x0C)
                case UInt8(ascii: "n"): utf8.append(0x0A)
                case UInt8(ascii: "r"): utf8.append(0x0D)
                case UInt8(ascii: "t"): utf8.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try parseHex4()
                    if (0xD800...0xDBFF).contains(scalar) {
                        // A high surrogate must be followed by `\u` and a low surrogate.
                        guard current == UInt8(ascii: "\\"), index + 1 < bytes.count, bytes[index + 1] == UInt8(ascii: "u")
                        else { throw fail() }
                        index += 2
                        let low = try parseHex4()
                        guard (0xDC00...0xDFFF).contains(low) else { throw fail() }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    } else if (0xDC00...0xDFFF).contains(scalar) {
                        throw fail()
                    }
                    guard let unicode = Unicode.Scalar(scalar) else { throw fail() }
                    utf8.append(contentsOf: Array(String(Character(unicode)).utf8))
                default: throw fail()
                }
            default:
                if byte < 0x20 { throw fail() }
                utf8.append(byte)
            }
        }
    }

    private mutating func parseHex4() throws(JSONSyntaxError) -> UInt32 {
        guard index + 4 <= bytes.count else { throw fail() }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw fail()
            }
            value = value << 4 | UInt32(digit)
            index += 1
        }
        return value
    }
}
