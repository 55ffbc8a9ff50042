import Foundation

/// Fast UUID text conversion. Foundation's `UUID(uuidString:)` goes through `sscanf` and
/// `uuidString` through `snprintf`; at a million rows that shows.
extension UUID {
    /// The canonical lower-case form PostgreSQL prints: `8-4-4-4-12` hex digits.
    public var lowercasedString: String {
        let hex: [UInt8] = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(36)
        withUnsafeBytes(of: uuid) { raw in
            for (i, byte) in raw.enumerated() {
                if i == 4 || i == 6 || i == 8 || i == 10 { out.append(UInt8(ascii: "-")) }
                out.append(hex[Int(byte >> 4)])
                out.append(hex[Int(byte & 0x0F)])
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Parses `8-4-4-4-12` hex digits (either case) from raw bytes.
    public init?(textBytes bytes: UnsafeBufferPointer<UInt8>) {
        guard bytes.count == 36 else { return nil }
        var value: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        let ok = withUnsafeMutableBytes(of: &value) { out -> Bool in
            var index = 0
            for position in 0..<16 {
                if index == 8 || index == 13 || index == 18 || index == 23 {
                    guard bytes[index] == UInt8(ascii: "-") else { return false }
                    index += 1
                }
                guard let high = UUID.nibble(bytes[index]), let low = UUID.nibble(bytes[index + 1]) else { return false }
                out[position] = high << 4 | low
                index += 2
            }
            return true
        }
        guard ok else { return nil }
        self.init(uuid: value)
    }

    private static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case 48...57: return c - 48
        case 97...102: return c - 87
        case 65...70: return c - 55
        default: return nil
        }
    }
}
