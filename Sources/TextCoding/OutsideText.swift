/// Outside text (names, titles, reasons people typed) on its way to an operator's terminal or a phone's lock
/// screen, where a control character (a line break, an escape sequence) or a bidirectional control (U+200E/F
/// marks, U+202A–U+202E embeddings and overrides, U+2066–U+2069 isolates) could break a line, rewrite the
/// screen or make the text read as something else.
public enum OutsideText {
    private static let bidiControls: Set<UInt32> = [0x200E, 0x200F, 0x202A, 0x202B, 0x202C, 0x202D, 0x202E, 0x2066, 0x2067, 0x2068, 0x2069]

    private static func isHidden(_ scalar: Unicode.Scalar) -> Bool {
        scalar.properties.generalCategory == .control || bidiControls.contains(scalar.value)
    }

    /// Whether `text` holds any such character. Fast path on bytes: C0 controls, DEL, the C1 controls (UTF-8
    /// lead byte 0xC2 followed by 0x80–0x9F) and the bidirectional controls (lead byte 0xE2).
    private static func hasHidden(_ text: String) -> Bool {
        mayHoldHidden(text) && text.unicodeScalars.contains(where: isHidden)
    }

    /// Whether any byte of `text` begins such a character (the line and paragraph separators too: lead byte 0xE2).
    private static func mayHoldHidden(_ text: String) -> Bool {
        text.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F || $0 == 0xC2 || $0 == 0xE2 })
    }

    /// For a terminal: each such character shown as `\u{…}`, so the operator sees it is there.
    public static func printable(_ text: String) -> String {
        guard hasHidden(text) else { return text }
        var out = ""
        for scalar in text.unicodeScalars {
            if isHidden(scalar) {
                out += "\\u{" + String(scalar.value, radix: 16) + "}"
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    /// For a phone: control characters become spaces and bidirectional controls are dropped.
    public static func flattened(_ text: String) -> String {
        guard hasHidden(text) else { return text }
        var out = String.UnicodeScalarView()
        for scalar in text.unicodeScalars where !bidiControls.contains(scalar.value) {
            out.append(scalar.properties.generalCategory == .control ? " " : scalar)
        }
        return String(out)
    }

    /// For storing and logging: control characters, and the line and paragraph separators (which end a log
    /// line too), become U+FFFD, so that something still shows where they were. (PostgreSQL text refuses a NUL.)
    public static func neutralized(_ text: String) -> String {
        guard mayHoldHidden(text) else { return text }
        var out = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            let breaking = scalar.properties.generalCategory == .control || scalar.value == 0x2028 || scalar.value == 0x2029
            out.append(breaking ? "\u{FFFD}" : scalar)
        }
        return String(out)
    }
}
