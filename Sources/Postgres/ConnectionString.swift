import CLibPQ
import Foundation

/// A connection string (URL or `key=value` list) as something to check before connecting and to keep
/// out of every message: libpq quotes the string, or the piece of it that did not parse, in its errors,
/// and that piece is often the password.
enum ConnectionString {
    /// libpq's verdict on `string` without connecting: nil when it parses, else its message, redacted.
    static func problem(_ string: String) -> String? {
        var error: UnsafeMutablePointer<CChar>? = nil
        guard let options = PQconninfoParse(string, &error) else {
            defer { if let error { PQfreemem(error) } }
            let message = error.map { String(cString: $0).trimmingCharacters(in: .whitespacesAndNewlines) } ?? "out of memory"
            return redact(message, connectionString: string)
        }
        PQconninfoFree(options)
        return nil
    }

    /// `message` with the connection string itself replaced by `***`, and every piece libpq quoted that may
    /// hold part of a password: a malformed string is split where libpq sees fit (a `/` in a URL's password
    /// ends its host part, a space ends a keyword's value), so the piece it quotes is often a fragment of the
    /// password rather than the whole. libpq and the server put what they echo of a connection string in
    /// quotes; the rest of the message is their own words, left alone: replacing a password wherever it
    /// occurred masked "failed" in "authentication failed" (or every "a"), which told the password to whoever
    /// read the message, and hid the refusal from the exit code.
    static func redact(_ message: String, connectionString: String) -> String {
        let candidates = passwords(in: connectionString).filter { !$0.isEmpty }
        guard !candidates.isEmpty else { return message }
        var message = message.replacingOccurrences(of: connectionString, with: "***")
        // A password with a double quote in it: a piece libpq quotes is no longer told by the quotes alone
        // (`"se"cr%zz"`). The password itself, and each of its pieces around its quotes, go first.
        for candidate in candidates where candidate.contains("\"") {
            message = message.replacingOccurrences(of: candidate, with: "***")
            for part in candidate.split(separator: "\"") where part.count >= 2 {
                message = message.replacingOccurrences(of: "\"" + part, with: "\"***").replacingOccurrences(of: part + "\"", with: "***\"")
            }
        }
        return redactQuoted(message, candidates: candidates)
    }

    /// Replaces each double-quoted piece of `message` that shares a part with a password candidate (holds
    /// one, lies within one, however short, or has 4 characters in a row in common with one), except
    /// libpq's own keyword names (`connection option "port"`).
    static func redactQuoted(_ message: String, candidates: [String]) -> String {
        guard !candidates.isEmpty else { return message }
        let pieces = message.split(separator: "\"", omittingEmptySubsequences: false)
        guard pieces.count >= 3 else { return message }
        var out = ""
        for (index, piece) in pieces.enumerated() {
            if index > 0 { out += "\"" }
            // Odd pieces are the quoted ones (a stray last quote leaves an unclosed piece: treated alike).
            let text = String(piece)
            if index % 2 == 1, !keywords.contains(text), candidates.contains(where: { sharesPart(text, $0) }) {
                out += "***"
            } else {
                out += text
            }
        }
        return out
    }

    private static func sharesPart(_ quoted: String, _ secret: String) -> Bool {
        if quoted.isEmpty { return false }
        // One character too: libpq quotes the piece of a malformed string it stopped at, however short
        // (`password=my s` gives `missing "=" after "s"`).
        if secret.contains(quoted) { return true }
        if quoted.contains(secret) { return true }
        return longestCommonRun(Array(quoted.utf8), Array(secret.utf8)) >= 4
    }

    private static func longestCommonRun(_ a: [UInt8], _ b: [UInt8]) -> Int {
        guard !a.isEmpty, !b.isEmpty else { return 0 }
        var best = 0
        var previous = [Int](repeating: 0, count: b.count + 1)
        for i in 1...a.count {
            var current = [Int](repeating: 0, count: b.count + 1)
            for j in 1...b.count where a[i - 1] == b[j - 1] {
                current[j] = previous[j - 1] + 1
                best = max(best, current[j])
            }
            previous = current
        }
        return best
    }

    /// The PG* variable (or variables) whose value libpq refused in `message`, when the URL `string` does not set
    /// that keyword itself (libpq then applies the variable): `PGSSLMODE=bogus` beside a good URL was "the database
    /// URL is malformed", and its operator looked for the fault in the URL. The keyword is the one libpq's message
    /// names (`for connection option "connect_timeout"`, `invalid sslmode value`, `invalid port number`); a password's
    /// variable is never named (naming it beside the value quoted would tell the password).
    static func variableRefused(in message: String, url string: String) -> String? {
        let named: [String]
        if let match = message.firstMatch(of: /for connection option "([a-z_]+)"/) {
            named = [String(match.1)]
        } else if let match = message.firstMatch(of: /invalid ([a-z_]+) value: "/) {
            named = [String(match.1)]
        } else if message.contains("invalid port number") {
            named = ["port"]
        } else if message.contains("could not match"), message.contains("port numbers") || message.contains("host names") {
            named = ["host", "hostaddr", "port"]
        } else {
            return nil
        }
        var set: Set<String> = []
        if let options = PQconninfoParse(string, nil) {
            defer { PQconninfoFree(options) }
            var option = options
            while let keyword = option.pointee.keyword {
                if option.pointee.val != nil { set.insert(String(cString: keyword)) }
                option += 1
            }
        }
        guard let defaults = PQconndefaults() else { return nil }
        defer { PQconninfoFree(defaults) }
        let environment = ProcessInfo.processInfo.environment
        var variables: [String] = []
        var option = defaults
        while let pointer = option.pointee.keyword {
            defer { option += 1 }
            let keyword = String(cString: pointer)
            guard named.contains(keyword), !set.contains(keyword),
                  option.pointee.dispchar.map({ String(cString: $0) }) != "*",
                  let name = option.pointee.envvar.map({ String(cString: $0) }), let value = environment[name], !value.isEmpty else { continue }
            variables.append(name)
        }
        return variables.isEmpty ? nil : variables.joined(separator: " or ")
    }

    /// libpq's connection keywords (`host`, `port`, `sslmode`…), as it lists them.
    static let keywords: Set<String> = {
        var names: Set<String> = []
        guard let defaults = PQconndefaults() else { return names }
        defer { PQconninfoFree(defaults) }
        var option = defaults
        while let keyword = option.pointee.keyword {
            names.insert(String(cString: keyword))
            option += 1
        }
        return names
    }()

    /// The passwords a connection string may hold, found as leniently as a malformed string requires:
    /// the URL's `user:password@` (raw and percent-decoded), a `password=` query parameter, and a
    /// `password=` keyword (quoted or not; unquoted, up to the next keyword, spaces and all), and whatever
    /// stands between the first `:` and the last `@` of a string that looks like a URL without being one
    /// (`postgresql:/user:secret@host`).
    static func passwords(in string: String) -> [String] {
        var found: [String] = []
        if string.range(of: "://") == nil, let at = string.lastIndex(of: "@") {
            var userInfo = string[..<at]
            if let scheme = userInfo.firstMatch(of: /^[A-Za-z][A-Za-z0-9+.-]*:\/*/) { userInfo = userInfo[scheme.range.upperBound...] }
            if let colon = userInfo.firstIndex(of: ":") { found.append(String(userInfo[userInfo.index(after: colon)...])) }
        }
        if let scheme = string.range(of: "://") {
            let rest = string[scheme.upperBound...]
            // The user info ends at the last '@' (a password may hold '/' or '?', and a malformed URL
            // may have no path at all).
            if let at = rest.lastIndex(of: "@") {
                let userInfo = rest[..<at]
                if let colon = userInfo.firstIndex(of: ":") {
                    let password = String(userInfo[userInfo.index(after: colon)...])
                    found.append(password)
                    if let decoded = password.removingPercentEncoding { found.append(decoded) }
                }
            }
            for parameter in rest.split(whereSeparator: { $0 == "?" || $0 == "&" }) where parameter.hasPrefix("password=") {
                let value = String(parameter.dropFirst("password=".count))
                found.append(value)
                if let decoded = value.removingPercentEncoding { found.append(decoded) }
            }
        }
        var search = string[...]
        while let key = search.range(of: "password") {
            var value = search[key.upperBound...].drop { $0 == " " }
            search = search[key.upperBound...]
            guard value.first == "=" else { continue }
            value = value.dropFirst().drop { $0 == " " }
            if value.first == "'" {
                found.append(String(value.dropFirst().prefix { $0 != "'" }))
            } else {
                found.append(String(value.prefix { $0 != " " && $0 != "&" }))
                // A value with spaces is malformed, and libpq quotes its pieces: up to the next keyword.
                var rest = String(value)
                if let next = rest.firstMatch(of: /\s+([A-Za-z_]+)\s*=/), keywords.contains(String(next.1)) {
                    rest = String(rest[..<next.range.lowerBound])
                }
                found.append(rest.trimmingCharacters(in: .whitespaces))
            }
        }
        // A password with an unencoded '@': libpq ends the user info at the first one, so what follows it is
        // read as the host, and quoted as such in its message ("could not translate host name …").
        for password in found where password.contains("@") {
            found += password.split(separator: "@").map(String.init)
        }
        return found
    }
}
