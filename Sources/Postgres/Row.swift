import CLibPQ
import Foundation
import TextCoding

/// One row of a result, read in PostgreSQL's text format. A row from `Connection.query` keeps its
/// result alive; a row handed to a `Connection.stream` callback is valid only inside that callback.
public struct Row {
    let result: OpaquePointer
    let row: Int32
    /// The `QueryResult` that owns `result`, if any (nil while streaming).
    let owner: AnyObject?

    init(result: OpaquePointer, row: Int32, owner: AnyObject? = nil) {
        self.result = result
        self.row = row
        self.owner = owner
    }

    /// Number of columns.
    public var count: Int { Int(PQnfields(result)) }

    /// The column's name, for error messages.
    public func name(_ column: Int) -> String {
        String(cString: PQfname(result, Int32(column)))
    }

    public func isNull(_ column: Int) -> Bool {
        PQgetisnull(result, row, Int32(column)) == 1
    }

    /// The column's raw text bytes, or nil for NULL.
    public func bytes(_ column: Int) -> UnsafeBufferPointer<UInt8>? {
        if isNull(column) { return nil }
        let length = Int(PQgetlength(result, row, Int32(column)))
        let pointer = UnsafeRawPointer(PQgetvalue(result, row, Int32(column))!)
        return UnsafeBufferPointer(start: pointer.assumingMemoryBound(to: UInt8.self), count: length)
    }

    /// Decodes a column; throws when it is NULL or does not hold a `T`.
    public func decode<T: PostgresDecodable>(_ column: Int, as type: T.Type = T.self) throws -> T {
        guard let bytes = bytes(column) else {
            throw PostgresError.decoding(column: name(column), expected: T.postgresTypeName, reason: "is NULL")
        }
        guard let value = T(postgresText: bytes) else {
            throw PostgresError.decoding(column: name(column), expected: T.postgresTypeName, reason: "malformed value")
        }
        return value
    }

    /// Decodes a nullable column.
    public func decode<T: PostgresDecodable>(_ column: Int, as type: T?.Type = T?.self) throws -> T? {
        if isNull(column) { return nil }
        return try decode(column, as: T.self)
    }
}

/// A Swift value that can be read from PostgreSQL's text format.
public protocol PostgresDecodable {
    init?(postgresText: UnsafeBufferPointer<UInt8>)
    static var postgresTypeName: String { get }
}

extension String: PostgresDecodable {
    public init?(postgresText: UnsafeBufferPointer<UInt8>) { self = String(decoding: postgresText, as: UTF8.self) }
    public static var postgresTypeName: String { "text" }
}

extension Int: PostgresDecodable {
    public init?(postgresText bytes: UnsafeBufferPointer<UInt8>) {
        guard !bytes.isEmpty else { return nil }
        var value = 0
        var negative = false
        for (i, c) in bytes.enumerated() {
            if i == 0 && c == 45 { negative = true; continue }
            guard c >= 48, c <= 57 else { return nil }
            let (m, o1) = value.multipliedReportingOverflow(by: 10)
            let (a, o2) = m.addingReportingOverflow(Int(c - 48))
            guard !o1, !o2 else { return nil }
            value = a
        }
        if negative && bytes.count == 1 { return nil }
        self = negative ? -value : value
    }
    public static var postgresTypeName: String { "integer" }
}

extension Double: PostgresDecodable {
    public init?(postgresText bytes: UnsafeBufferPointer<UInt8>) {
        guard let value = Double(String(decoding: bytes, as: UTF8.self)) else { return nil }
        self = value
    }
    public static var postgresTypeName: String { "double precision" }
}

extension Bool: PostgresDecodable {
    public init?(postgresText bytes: UnsafeBufferPointer<UInt8>) {
        guard bytes.count == 1 else { return nil }
        switch bytes[0] {
        case 116: self = true   // t
        case 102: self = false  // f
        default: return nil
        }
    }
    public static var postgresTypeName: String { "boolean" }
}

extension UUID: PostgresDecodable {
    public init?(postgresText bytes: UnsafeBufferPointer<UInt8>) {
        guard let value = UUID(textBytes: bytes) else { return nil }
        self = value
    }
    public static var postgresTypeName: String { "uuid" }
}

extension Date: PostgresDecodable {
    public init?(postgresText bytes: UnsafeBufferPointer<UInt8>) {
        guard let value = Timestamp.parse(bytes) else { return nil }
        self = value
    }
    public static var postgresTypeName: String { "timestamptz" }
}

/// jsonb or json, kept as its text: decode it with `JSONDecoder` or pass it on unchanged.
public struct JSONValue: PostgresDecodable, Sendable {
    public var text: String
    public init?(postgresText: UnsafeBufferPointer<UInt8>) { text = String(decoding: postgresText, as: UTF8.self) }
    public static var postgresTypeName: String { "jsonb" }

    /// The JSON as Foundation objects.
    public func object() throws -> Any {
        try JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])
    }
}

/// A one-dimensional array (`text[]`, `int[]`, `uuid[]`, …) read from PostgreSQL's array literal.
extension Array: PostgresDecodable where Element: PostgresDecodable {
    public init?(postgresText bytes: UnsafeBufferPointer<UInt8>) {
        guard let texts = PostgresArrayLiteral.parse(bytes) else { return nil }
        var values: [Element] = []
        values.reserveCapacity(texts.count)
        for text in texts {
            guard let text else { return nil } // NULL elements: decode as [T?] is not supported; keep strict
            var copy = text
            guard let value = copy.withUTF8({ Element(postgresText: $0) }) else { return nil }
            values.append(value)
        }
        self = values
    }
    public static var postgresTypeName: String { Element.postgresTypeName + "[]" }
}

enum PostgresArrayLiteral {
    /// Splits `{a,"b \"c\"",NULL}` into its elements. One dimension only.
    static func parse(_ bytes: UnsafeBufferPointer<UInt8>) -> [String?]? {
        guard bytes.count >= 2, bytes.first == 123, bytes.last == 125 else { return nil } // { }
        var items: [String?] = []
        var i = 1
        let end = bytes.count - 1
        if i == end { return [] }
        while i <= end {
            var item: [UInt8] = []
            var quoted = false
            if bytes[i] == 34 { // "
                quoted = true
                i += 1
                while i < end, bytes[i] != 34 {
                    if bytes[i] == 92 { i += 1 } // backslash escape
                    guard i < end else { return nil }
                    item.append(bytes[i])
                    i += 1
                }
                guard i < end else { return nil }
                i += 1 // closing quote
            } else {
                while i < end, bytes[i] != 44 {
                    if bytes[i] == 123 { return nil } // nested arrays are not supported
                    item.append(bytes[i])
                    i += 1
                }
            }
            let text = String(decoding: item, as: UTF8.self)
            items.append(!quoted && text == "NULL" ? nil : text)
            guard i == end || bytes[i] == 44 else { return nil }
            i += 1
        }
        return items
    }
}
