/// Finds a statement in a migration's SQL that would end `migrate`'s own transaction (`COMMIT`, `ROLLBACK`,
/// `BEGIN`, …). Each migration runs in one transaction with its row in `schema_migrations`; a `COMMIT` of its own
/// committed what came before it, so a failure after it left that part in the database and the migration
/// unrecorded ("failed and was rolled back"), and the next `migrate` failed on what it had already made.
///
/// Reads the SQL as PostgreSQL's lexer does, as far as telling statements apart needs: comments (`--`, nested
/// `/* */`), quoted strings (`'…'`, `E'…'` with backslash escapes), quoted names (`"…"`) and dollar-quoted bodies
/// (`$$…$$`, `$tag$…$tag$`: a function's or a `DO` block's own `BEGIN … END`) are skipped; the first word of each
/// statement is checked.
enum TransactionControl {
    static let words: Set<String> = ["BEGIN", "START", "COMMIT", "END", "ROLLBACK", "ABORT", "SAVEPOINT", "RELEASE", "PREPARE"]

    /// The first such statement's opening words (`COMMIT`, `PREPARE TRANSACTION`), or nil.
    static func first(in sql: String) -> String? {
        let s = Array(sql.utf8)
        var i = 0
        var atStatementStart = true
        // Inside a SQL function's `BEGIN ATOMIC … END` body, whose statements end in `;` too.
        var atomicDepth = 0
        func isWordByte(_ b: UInt8) -> Bool { (b >= 65 && b <= 90) || (b >= 97 && b <= 122) || (b >= 48 && b <= 57) || b == 95 || b >= 128 }
        while i < s.count {
            let c = s[i]
            let next: UInt8? = i + 1 < s.count ? s[i + 1] : nil
            switch c {
            case UInt8(ascii: "-") where next == UInt8(ascii: "-"):
                while i < s.count && s[i] != UInt8(ascii: "\n") { i += 1 }
            case UInt8(ascii: "/") where next == UInt8(ascii: "*"):
                var depth = 0
                while i < s.count {
                    if s[i] == UInt8(ascii: "/"), i + 1 < s.count, s[i + 1] == UInt8(ascii: "*") { depth += 1; i += 2; continue }
                    if s[i] == UInt8(ascii: "*"), i + 1 < s.count, s[i + 1] == UInt8(ascii: "/") { depth -= 1; i += 2; if depth == 0 { break }; continue }
                    i += 1
                }
            case UInt8(ascii: "'"), UInt8(ascii: "\""):
                let escapes = c == UInt8(ascii: "'") && i > 0 && (s[i - 1] == UInt8(ascii: "E") || s[i - 1] == UInt8(ascii: "e"))
                atStatementStart = false
                i += 1
                while i < s.count {
                    if escapes && s[i] == UInt8(ascii: "\\") { i += 2; continue }
                    if s[i] == c {
                        if i + 1 < s.count && s[i + 1] == c { i += 2; continue } // '' or "" inside
                        break
                    }
                    i += 1
                }
                i += 1
            case UInt8(ascii: "$") where i == 0 || !isWordByte(s[i - 1]):
                // $tag$ … $tag$ (tag empty or a name not starting with a digit); `$1` is a parameter.
                var j = i + 1
                while j < s.count && isWordByte(s[j]) && s[j] != UInt8(ascii: "$") { j += 1 }
                guard j < s.count, s[j] == UInt8(ascii: "$"), !(i + 1 < j && s[i + 1] >= 48 && s[i + 1] <= 57) else { i += 1; continue }
                let delimiter = Array(s[i...j])
                atStatementStart = false
                i = j + 1
                while i < s.count {
                    if s[i] == UInt8(ascii: "$"), i + delimiter.count <= s.count, Array(s[i..<(i + delimiter.count)]) == delimiter {
                        i += delimiter.count
                        break
                    }
                    i += 1
                }
            case UInt8(ascii: ";"):
                atStatementStart = true
                i += 1
            case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\n"), UInt8(ascii: "\r"), 12:
                i += 1
            default:
                guard isWordByte(c) else { atStatementStart = false; i += 1; continue }
                var j = i
                while j < s.count && isWordByte(s[j]) { j += 1 }
                let word = String(decoding: s[i..<j], as: UTF8.self).uppercased()
                var k = j
                while k < s.count && (s[k] == 32 || s[k] == 9 || s[k] == 10 || s[k] == 13) { k += 1 }
                var l = k
                while l < s.count && isWordByte(s[l]) { l += 1 }
                let second = String(decoding: s[k..<l], as: UTF8.self).uppercased()
                if !atStatementStart {
                    if word == "BEGIN" && second == "ATOMIC" { atomicDepth += 1 }
                } else if atomicDepth > 0 {
                    if word == "END" { atomicDepth -= 1 }
                } else if words.contains(word) {
                    // START and PREPARE only as START TRANSACTION and PREPARE TRANSACTION (PREPARE name AS … is a statement).
                    if word == "START" || word == "PREPARE" {
                        if second == "TRANSACTION" { return "\(word) TRANSACTION" }
                    } else {
                        return word
                    }
                }
                atStatementStart = false
                i = j
            }
        }
        return nil
    }
}
