import Foundation
import TextCoding

/// A SQL statement with its parameters. Built by string interpolation, every interpolated value
/// becomes a `$n` placeholder and travels separately from the text, so the unsafe way is the awkward
/// way: `"SELECT … WHERE id = \(id)"` is parameterized. SQL text can only be spliced in from
/// compile-time constants (`\(sql: "…")`).
public struct Query: ExpressibleByStringInterpolation, Sendable, CustomStringConvertible {
    public private(set) var sql: String
    public private(set) var parameters: [String?]

    public init(stringLiteral value: StaticString) {
        sql = value.description
        parameters = []
    }

    public init(stringInterpolation: StringInterpolation) {
        sql = stringInterpolation.sql
        parameters = stringInterpolation.parameters
    }

    /// The SQL text only; parameters are never part of a description.
    public var description: String { sql }

    public struct StringInterpolation: StringInterpolationProtocol {
        var sql = ""
        var parameters: [String?] = []

        public init(literalCapacity: Int, interpolationCount: Int) {
            sql.reserveCapacity(literalCapacity + interpolationCount * 3)
        }

        public mutating func appendLiteral(_ literal: StaticString) {
            sql += literal.description
        }

        /// A parameter: sent as `$n`, its value in PostgreSQL's text format.
        public mutating func appendInterpolation(_ value: some PostgresEncodable) {
            parameters.append(value.postgresText)
            sql += "$\(parameters.count)"
        }

        /// An optional parameter: NULL when nil.
        public mutating func appendInterpolation(_ value: (some PostgresEncodable)?) {
            parameters.append(value?.postgresText)
            sql += "$\(parameters.count)"
        }

        /// A fragment of SQL text that is fixed at compile time (a column name from a fixed list).
        public mutating func appendInterpolation(sql fragment: StaticString) {
            sql += fragment.description
        }

        /// Another query, its parameters renumbered after ours.
        public mutating func appendInterpolation(_ query: Query) {
            let offset = parameters.count
            sql += offset == 0 ? query.sql : Query.renumber(query.sql, by: offset)
            parameters += query.parameters
        }
    }

    /// Shifts every `$n` placeholder in `sql` by `offset`, leaving string literals and quoted identifiers alone.
    static func renumber(_ sql: String, by offset: Int) -> String {
        var out = ""
        var iterator = sql.unicodeScalars.makeIterator()
        var quote: Unicode.Scalar? = nil
        var pending: Unicode.Scalar? = iterator.next()
        while let c = pending {
            pending = iterator.next()
            if let q = quote {
                out.unicodeScalars.append(c)
                if c == q { quote = nil }
                continue
            }
            if c == "'" || c == "\"" {
                quote = c
                out.unicodeScalars.append(c)
                continue
            }
            if c == "$", let next = pending, ("0"..."9").contains(next) {
                var digits = ""
                while let d = pending, ("0"..."9").contains(d) {
                    digits.unicodeScalars.append(d)
                    pending = iterator.next()
                }
                out += "$\(Int(digits)! + offset)"
                continue
            }
            out.unicodeScalars.append(c)
        }
        return out
    }
}

/// A Swift value that can be sent as a parameter, in PostgreSQL's text format.
public protocol PostgresEncodable {
    var postgresText: String? { get }
}

extension String: PostgresEncodable { public var postgresText: String? { self } }
extension Substring: PostgresEncodable { public var postgresText: String? { String(self) } }
extension Int: PostgresEncodable { public var postgresText: String? { String(self) } }
extension Int32: PostgresEncodable { public var postgresText: String? { String(self) } }
extension Int64: PostgresEncodable { public var postgresText: String? { String(self) } }
extension Double: PostgresEncodable { public var postgresText: String? { String(self) } }
extension Bool: PostgresEncodable { public var postgresText: String? { self ? "t" : "f" } }
extension UUID: PostgresEncodable { public var postgresText: String? { lowercasedString } }
extension Date: PostgresEncodable { public var postgresText: String? { Timestamp.format(self) } }

/// A PostgreSQL array parameter (`$1::text[]`, `$1::uuid[]`, …), for set-based statements that take
/// many rows at once through `unnest`.
public struct PostgresArray<Element>: PostgresEncodable {
    /// The array literal, built when the array is made.
    public let postgresText: String?

    /// Inlinable, so each call site gets code for its own element type: an outbox flush encodes
    /// thousands of elements, and generic code unspecialized looked up type metadata for each.
    @inlinable
    public init(_ elements: [Element?]) where Element: PostgresEncodable {
        var texts: [String?] = []
        texts.reserveCapacity(elements.count)
        for element in elements { texts.append(element?.postgresText ?? nil) }
        postgresText = PostgresArrayLiteral.make(texts)
    }

    @inlinable
    public init(_ elements: [Element]) where Element: PostgresEncodable {
        var texts: [String?] = []
        texts.reserveCapacity(elements.count)
        for element in elements { texts.append(element.postgresText) }
        postgresText = PostgresArrayLiteral.make(texts)
    }
}

extension PostgresArrayLiteral {
    /// The array literal of `texts` (nil is NULL), built on UTF-8 bytes: every element quoted, `"` and
    /// `\` escaped (an outbox flush sends thousands of elements, so this is on the hot path).
    @usableFromInline static func make(_ texts: [String?]) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(2 + texts.count * 16)
        bytes.append(UInt8(ascii: "{"))
        for index in texts.indices {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            guard var value = texts[index] else { bytes.append(contentsOf: "NULL".utf8); continue }
            bytes.append(UInt8(ascii: "\""))
            value.withUTF8 { utf8 in
                if !utf8.contains(where: { $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) {
                    bytes.append(contentsOf: utf8)
                    return
                }
                for byte in utf8 {
                    if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") { bytes.append(UInt8(ascii: "\\")) }
                    bytes.append(byte)
                }
            }
            bytes.append(UInt8(ascii: "\""))
        }
        bytes.append(UInt8(ascii: "}"))
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// A jsonb parameter from already-serialized JSON text.
public struct JSONText: PostgresEncodable, Sendable {
    public var text: String
    public init(_ text: String) { self.text = text }
    public var postgresText: String? { text }
}
