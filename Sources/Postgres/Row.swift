import CLibPQ
import Foundation
import TextCoding

/// One row of a result, read in PostgreSQL's text format. A row from `Connection.query` keeps its
/// result alive; a row handed to a `Connection.stream` callback is valid only inside that callback.
public struct Row {
    @usableFromInline let result: OpaquePointer
    @usableFromInline let row: Int32
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
        guard let name = PQfname(result, Int32(column)) else { return "#\(column)" } // a column out of range
        return String(cString: name)
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

    /// Decodes a column; throws when it is NULL or does not hold a `T`. Reads text or binary
    /// results, whichever the query asked for. Inlinable, so each call site decodes its own type
    /// directly (a claim decodes 17 columns for each of hundreds of rows).
    @inlinable
    public func decode<T: PostgresDecodable>(_ column: Int, as type: T.Type = T.self) throws -> T {
        guard let bytes = bytes(column) else {
            throw PostgresError.decoding(column: name(column), expected: T.postgresTypeName, reason: "is NULL")
        }
        let value: T?
        if PQfformat(result, Int32(column)) == 1 {
            value = T(postgresBinary: bytes, type: PQftype(result, Int32(column)))
        } else {
            value = T(postgresText: bytes)
        }
        guard let value else {
            throw PostgresError.decoding(column: name(column), expected: T.postgresTypeName, reason: "malformed value or another type")
        }
        return value
    }

    /// Decodes a nullable column.
    @inlinable
    public func decode<T: PostgresDecodable>(_ column: Int, as type: T?.Type = T?.self) throws -> T? {
        if isNull(column) { return nil }
        return try decode(column, as: T.self)
    }
}

/// A Swift value that can be read from PostgreSQL's text format, and for the common types from
/// its binary format too (what streaming queries use: no formatting on the server, no parsing here).
public protocol PostgresDecodable {
    init?(postgresText: UnsafeBufferPointer<UInt8>)
    /// Binary format for the column type `type` (an OID); nil when the type does not fit.
    init?(postgresBinary: UnsafeBufferPointer<UInt8>, type: UInt32)
    static var postgresTypeName: String { get }
}

extension PostgresDecodable {
    public init?(postgresBinary: UnsafeBufferPointer<UInt8>, type: UInt32) { return nil }
}

/// The type OIDs binary decoding understands (from pg_type.dat).
enum PostgresType {
    static let bool: UInt32 = 16, bytea: UInt32 = 17, name: UInt32 = 19, int8: UInt32 = 20, int2: UInt32 = 21, int4: UInt32 = 23
    static let text: UInt32 = 25, json: UInt32 = 114, float4: UInt32 = 700, float8: UInt32 = 701, bpchar: UInt32 = 1042
    static let varchar: UInt32 = 1043, timestamp: UInt32 = 1114, timestamptz: UInt32 = 1184, uuid: UInt32 = 2950, jsonb: UInt32 = 3802

    /// A big-endian integer of `bytes.count` (2, 4 or 8) bytes.
    static func integer(_ bytes: UnsafeBufferPointer<UInt8>) -> Int64? {
        guard bytes.count == 2 || bytes.count == 4 || bytes.count == 8 else { return nil }
        var value: UInt64 = 0
        for byte in bytes { value = value << 8 | UInt64(byte) }
        let shift = UInt64(64 - bytes.count * 8)
        return Int64(bitPattern: value << shift) >> Int64(shift) // sign-extend
    }
}

extension String: PostgresDecodable {
    public init?(postgresText: UnsafeBufferPointer<UInt8>) { self = String(decoding: postgresText, as: UTF8.self) }
    public init?(postgresBinary bytes: UnsafeBufferPointer<UInt8>, type: UInt32) {
        switch type {
        case PostgresType.text, PostgresType.varchar, PostgresType.bpchar, PostgresType.name, PostgresType.json:
            self = String(decoding: bytes, as: UTF8.self)
        default: return nil
        }
    }
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
    public init?(postgresBinary bytes: UnsafeBufferPointer<UInt8>, type: UInt32) {
        guard type == PostgresType.int8 || type == PostgresType.int4 || type == PostgresType.int2,
              let value = PostgresType.integer(bytes) else { return nil }
        self = Int(value)
    }
    public static var postgresTypeName: String { "integer" }
}

extension Double: PostgresDecodable {
    public init?(postgresText bytes: UnsafeBufferPointer<UInt8>) {
        guard let value = Double(String(decoding: bytes, as: UTF8.self)) else { return nil }
        self = value
    }
    public init?(postgresBinary bytes: UnsafeBufferPointer<UInt8>, type: UInt32) {
        switch (type, bytes.count) {
        case (PostgresType.float8, 8): self = Double(bitPattern: UInt64(bitPattern: PostgresType.integer(bytes)!))
        case (PostgresType.float4, 4): self = Double(Float(bitPattern: UInt32(truncatingIfNeeded: PostgresType.integer(bytes)!)))
        default: return nil
        }
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
    public init?(postgresBinary bytes: UnsafeBufferPointer<UInt8>, type: UInt32) {
        guard type == PostgresType.bool, bytes.count == 1 else { return nil }
        self = bytes[0] != 0
    }
    public static var postgresTypeName: String { "boolean" }
}

extension UUID: PostgresDecodable {
    public init?(postgresText bytes: UnsafeBufferPointer<UInt8>) {
        guard let value = UUID(textBytes: bytes) else { return nil }
        self = value
    }
    public init?(postgresBinary bytes: UnsafeBufferPointer<UInt8>, type: UInt32) {
        guard type == PostgresType.uuid, bytes.count == 16 else { return nil }
        var value: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &value) { $0.copyMemory(from: UnsafeRawBufferPointer(bytes)) }
        self = UUID(uuid: value)
    }
    public static var postgresTypeName: String { "uuid" }
}

extension Date: PostgresDecodable {
    /// PostgreSQL's `infinity` and `-infinity` (an open-ended pause, say) are `Date.distantFuture` and
    /// `Date.distantPast`: a row holding one is data, not a reason to fail the whole query.
    public init?(postgresText bytes: UnsafeBufferPointer<UInt8>) {
        if bytes.elementsEqual("infinity".utf8) { self = .distantFuture; return }
        if bytes.elementsEqual("-infinity".utf8) { self = .distantPast; return }
        guard let value = Timestamp.parse(bytes) else { return nil }
        self = value
    }
    /// Microseconds since 2000-01-01 00:00:00 UTC (integer datetimes, the only kind since PostgreSQL 10).
    public init?(postgresBinary bytes: UnsafeBufferPointer<UInt8>, type: UInt32) {
        guard type == PostgresType.timestamptz || type == PostgresType.timestamp, bytes.count == 8,
              let micros = PostgresType.integer(bytes) else { return nil }
        if micros == Int64.max { self = .distantFuture; return }
        if micros == Int64.min { self = .distantPast; return }
        self = Date(timeIntervalSince1970: 946_684_800 + Double(micros) / 1_000_000)
    }
    public static var postgresTypeName: String { "timestamptz" }
}

/// jsonb or json, kept as its text: decode it with `JSONDecoder` or pass it on unchanged.
public struct JSONValue: PostgresDecodable, Sendable {
    public var text: String
    public init(text: String) { self.text = text }
    public init?(postgresText: UnsafeBufferPointer<UInt8>) { text = String(decoding: postgresText, as: UTF8.self) }
    /// jsonb's binary form is a version byte (1) and the text; json's is the text.
    public init?(postgresBinary bytes: UnsafeBufferPointer<UInt8>, type: UInt32) {
        switch type {
        case PostgresType.jsonb:
            guard bytes.first == 1 else { return nil }
            text = String(decoding: UnsafeBufferPointer(rebasing: bytes.dropFirst()), as: UTF8.self)
        case PostgresType.json, PostgresType.text:
            text = String(decoding: bytes, as: UTF8.self)
        default: return nil
        }
    }
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
    /// The binary array format (`array_send`): dimensions, a null flag, the element type, then each
    /// dimension's size and lower bound, then each element as a length and its bytes. One dimension only.
    public init?(postgresBinary bytes: UnsafeBufferPointer<UInt8>, type: UInt32) {
        func int32(at offset: Int) -> Int? {
            guard offset + 4 <= bytes.count else { return nil }
            return PostgresType.integer(UnsafeBufferPointer(rebasing: bytes[offset..<offset + 4])).map(Int.init)
        }
        guard let dimensions = int32(at: 0), let elementType = int32(at: 8) else { return nil }
        if dimensions == 0 { self = []; return }
        // Each element takes at least its 4-byte length: a count the bytes cannot hold is refused before any
        // memory is reserved for it.
        guard dimensions == 1, let count = int32(at: 12), count >= 0, count <= (bytes.count - 20) / 4 else { return nil }
        var offset = 20
        var values: [Element] = []
        values.reserveCapacity(count)
        for _ in 0..<count {
            guard let length = int32(at: offset), length >= 0, offset + 4 + length <= bytes.count else { return nil } // NULL elements: strict
            let element = UnsafeBufferPointer(rebasing: bytes[offset + 4..<offset + 4 + length])
            guard let value = Element(postgresBinary: element, type: UInt32(truncatingIfNeeded: elementType)) else { return nil }
            values.append(value)
            offset += 4 + length
        }
        self = values
    }
    public static var postgresTypeName: String { Element.postgresTypeName + "[]" }
}

@usableFromInline enum PostgresArrayLiteral {
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
