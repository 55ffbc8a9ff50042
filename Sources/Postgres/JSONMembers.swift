import Foundation

extension JSONValue {
    /// The string-valued members of a JSON object, sorted by key; members of other kinds are left out
    /// (FCM's data takes strings only). A flat object without escapes, which is what a notification's
    /// `data` is, is read straight from jsonb's text; anything else goes through `JSONSerialization`.
    public func stringMembers() -> [(String, String)] {
        if let members = flatStringMembers() { return members }
        guard let object = (try? object()) as? [String: Any] else { return [] }
        return object.keys.sorted().compactMap { key in (object[key] as? String).map { (key, $0) } }
    }

    /// What `stringMembers` returns, for a flat object whose strings hold no escape; nil for anything
    /// else, which the general path then reads.
    func flatStringMembers() -> [(String, String)]? {
        var text = self.text
        return text.withUTF8 { bytes in
            var reader = FlatObjectReader(bytes: bytes)
            return reader.stringMembers()
        }
    }
}

/// Reads `{"key": "value", "n": 1, …}` with string, number, true, false and null members; nil on
/// anything else (an escape, a nested object or array, a repeated key, malformed text).
private struct FlatObjectReader {
    let bytes: UnsafeBufferPointer<UInt8>
    var index = 0

    init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    mutating func stringMembers() -> [(String, String)]? {
        var members: [(String, String)] = []
        var keys: [String] = []
        skipSpace()
        guard take("{") else { return nil }
        skipSpace()
        if !take("}") {
            repeat {
                skipSpace()
                guard let key = string() else { return nil }
                keys.append(key)
                skipSpace()
                guard take(":") else { return nil }
                skipSpace()
                if index < bytes.count, bytes[index] == UInt8(ascii: "\"") {
                    guard let value = string() else { return nil }
                    members.append((key, value))
                } else {
                    guard word("true") || word("false") || word("null") || number() else { return nil }
                }
                skipSpace()
            } while take(",")
            guard take("}") else { return nil }
        }
        skipSpace()
        guard index == bytes.count, Set(keys).count == keys.count else { return nil }
        return members.sorted { $0.0 < $1.0 }
    }

    private mutating func take(_ character: Unicode.Scalar) -> Bool {
        guard index < bytes.count, bytes[index] == UInt8(ascii: character) else { return false }
        index += 1
        return true
    }

    private mutating func skipSpace() {
        while index < bytes.count, bytes[index] == 0x20 || bytes[index] == 0x0A || bytes[index] == 0x0D || bytes[index] == 0x09 {
            index += 1
        }
    }

    /// A string without escapes or control characters.
    private mutating func string() -> String? {
        guard take("\"") else { return nil }
        let start = index
        while index < bytes.count, bytes[index] != UInt8(ascii: "\"") {
            if bytes[index] == UInt8(ascii: "\\") || bytes[index] < 0x20 { return nil }
            index += 1
        }
        guard index < bytes.count else { return nil }
        let value = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
        index += 1
        return value
    }

    private mutating func word(_ word: StaticString) -> Bool {
        let count = word.utf8CodeUnitCount
        guard index + count <= bytes.count else { return false }
        for offset in 0..<count where bytes[index + offset] != word.utf8Start[offset] { return false }
        index += count
        return true
    }

    /// A number in JSON's grammar: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
    private mutating func number() -> Bool {
        _ = take("-")
        let first = index
        guard digits() > 0, bytes[first] != UInt8(ascii: "0") || index - first == 1 else { return false }
        if take("."), digits() == 0 { return false }
        if take("e") || take("E") {
            if !take("+") { _ = take("-") }
            guard digits() > 0 else { return false }
        }
        return true
    }

    private mutating func digits() -> Int {
        let start = index
        while index < bytes.count, bytes[index] >= UInt8(ascii: "0"), bytes[index] <= UInt8(ascii: "9") { index += 1 }
        return index - start
    }
}
