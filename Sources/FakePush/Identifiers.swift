import Foundation

/// A small, fast, non-cryptographic generator (Steele, Lea, Flood 2014) for IDs that only need to be unique.
struct SplitMix64 {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Canonical UUID text (`8-4-4-4-12` hex digits).
enum UUIDText {
    private static let hexDigits = Array("0123456789abcdef".utf8)

    static func format(high: UInt64, low: UInt64) -> String {
        String(unsafeUninitializedCapacity: 36) { buffer in
            var index = 0
            func put(_ value: UInt64, digits: Int) {
                for shift in stride(from: (digits - 1) * 4, through: 0, by: -4) {
                    buffer[index] = hexDigits[Int((value >> UInt64(shift)) & 0xF)]
                    index += 1
                }
            }
            func dash() { buffer[index] = UInt8(ascii: "-"); index += 1 }
            put(high >> 32, digits: 8); dash()
            put((high >> 16) & 0xFFFF, digits: 4); dash()
            put(high & 0xFFFF, digits: 4); dash()
            put(low >> 48, digits: 4); dash()
            put(low & 0xFFFF_FFFF_FFFF, digits: 12)
            return index
        }
    }

    /// True for `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` in hex of either case.
    static func isCanonical(_ text: String) -> Bool {
        let utf8 = text.utf8
        guard utf8.count == 36 else { return false }
        for (index, byte) in utf8.enumerated() {
            if index == 8 || index == 13 || index == 18 || index == 23 {
                if byte != UInt8(ascii: "-") { return false }
            } else if !((byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
                        || (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "f"))
                        || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "F"))) {
                return false
            }
        }
        return true
    }
}
