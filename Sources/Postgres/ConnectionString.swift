import CLibPQ

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

    /// `message` with the connection string itself and each password in it replaced by `***`.
    static func redact(_ message: String, connectionString: String) -> String {
        var redacted = message
        let secrets = [connectionString] + passwords(in: connectionString)
        // Longest first, so a password inside the whole string does not leave the rest of it behind.
        for secret in secrets.filter({ !$0.isEmpty }).sorted(by: { $0.count > $1.count }) {
            redacted = redacted.replacingOccurrences(of: secret, with: "***")
        }
        return redacted
    }

    /// The passwords a connection string may hold, found as leniently as a malformed string requires:
    /// the URL's `user:password@` (raw and percent-decoded), a `password=` query parameter, and a
    /// `password=` keyword (quoted or not).
    static func passwords(in string: String) -> [String] {
        var found: [String] = []
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
            }
        }
        return found
    }
}
