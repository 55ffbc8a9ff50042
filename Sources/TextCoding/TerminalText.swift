/// Outside text (names, titles, reasons people typed) on its way to an operator's terminal.
public enum TerminalText {
    /// Text safe for a terminal: control characters (newlines, escape sequences) shown as `\u{…}`.
    /// U+200E/F marks, U+202A–U+202E embeddings and overrides, U+2066–U+2069 isolates.
    public static let bidiControls: Set<UInt32> = [0x200E, 0x200F, 0x202A, 0x202B, 0x202C, 0x202D, 0x202E, 0x2066, 0x2067, 0x2068, 0x2069]

    public static func printable(_ text: String) -> String {
        // Fast path on bytes: C0 controls, DEL, the C1 controls (UTF-8 lead byte 0xC2 followed by 0x80–0x9F),
        // and the bidirectional controls (lead byte 0xE2), which can make a line read as something else.
        let bytes = text.utf8
        guard bytes.contains(where: { $0 < 0x20 || $0 == 0x7F || $0 == 0xC2 || $0 == 0xE2 }) else { return text }
        func hidden(_ scalar: Unicode.Scalar) -> Bool {
            scalar.properties.generalCategory == .control || bidiControls.contains(scalar.value)
        }
        guard text.unicodeScalars.contains(where: hidden) else { return text }
        var out = ""
        for scalar in text.unicodeScalars {
            if hidden(scalar) {
                out += "\\u{" + String(scalar.value, radix: 16) + "}"
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}
