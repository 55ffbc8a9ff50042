import CLibPQ

/// What went wrong talking to PostgreSQL. Messages name the SQLSTATE and the server's primary message,
/// never a bound parameter value (the server's DETAIL line, which can quote values, is left out).
public enum PostgresError: Error, CustomStringConvertible, Sendable {
    /// The connection string does not parse (libpq's message, without the string or its passwords).
    case invalidConnectionString(message: String)
    /// Settings refused before a session began that are not the URL's text: a PG* variable libpq read
    /// (`PGSSLMODE=bogus` with no URL), a service that is not defined (`PGSERVICE`, `service=`), or startup options
    /// the server refused (`options=-c …`, `PGOPTIONS`). Trying again will not help.
    case invalidSettings(message: String)
    /// The server could not be reached or refused the connection (libpq's own message).
    case connectionFailed(message: String)
    /// The server answered a statement with an error.
    case server(ServerError)
    /// A column did not hold what the caller asked for.
    case decoding(column: String, expected: String, reason: String)
    /// A value could not be sent (for example a string holding a NUL byte).
    case encoding(reason: String)
    /// The connection broke or libpq reported something unexpected.
    case connectionLost(message: String)

    public var description: String {
        switch self {
        case .invalidConnectionString(let message):
            return "the database URL is malformed: \(message)"
        case .invalidSettings(let message):
            return "the connection settings were refused: \(message)"
        case .connectionFailed(let message):
            return "cannot connect to PostgreSQL: \(message)"
        case .server(let error):
            return error.description
        case .decoding(let column, let expected, let reason):
            return "column \(column): expected \(expected): \(reason)"
        case .encoding(let reason):
            return "cannot send a parameter: \(reason)"
        case .connectionLost(let message):
            return "PostgreSQL connection failed: \(message)"
        }
    }

    /// A connection the server refused for good: the login (a wrong password, no pg_hba.conf entry, no such
    /// role), the database (none of that name, or no CONNECT privilege on it), or the TLS setup. Trying again will not help: a service that reconnected
    /// every few seconds for ever said nothing an alert could see.
    public var refusedLogin: RefusedLogin? {
        guard case .connectionFailed(let message) = self else { return nil }
        if message.contains("FATAL:") && message.contains("database \"") && message.hasSuffix("does not exist") { return .database }
        // Not "too many connections for role": that one passes.
        let markers = ["password authentication failed", "authentication failed for user", "no pg_hba.conf entry",
                       "pg_hba.conf rejects connection", "no password supplied", "is not permitted to log in"]
        if markers.contains(where: message.contains) { return .login }
        if message.contains("FATAL:") && message.contains("role \"") && message.hasSuffix("does not exist") { return .login }
        // The role may log in but not connect to this database (REVOKE CONNECT … FROM PUBLIC).
        if message.contains("FATAL:") && message.contains("permission denied for database") { return .connectPrivilege }
        // The TLS setup of the URL (sslmode, sslrootcert, the host name the certificate names): libpq's own words.
        let tlsMarkers = ["certificate verify failed", "does not match host name", "root certificate file",
                          "server does not support SSL, but SSL was required", "certificate present, but not private key",
                          "could not load private key file", "could not open certificate file", "could not read certificate file",
                          "private key file", "SSL error: tlsv1 alert", "SSL error: sslv3 alert"]
        // With several hosts (`host=a,b`), libpq says why each failed: one host's certificate refused while
        // another is down (a failover) is no setting to fix, so each must have been refused for its TLS.
        let attempts = message.components(separatedBy: "connection to server ").filter { !$0.trimmingCharacters(in: .whitespaces).isEmpty }
        if !attempts.isEmpty, attempts.allSatisfy({ attempt in tlsMarkers.contains(where: attempt.contains) }) { return .tls }
        return nil
    }

    /// What the server or libpq refused for good: the login, the database (none of that name), the role's right
    /// to connect to it, or the TLS setup (a certificate that does not verify, a CA file missing).
    public enum RefusedLogin: Sendable { case login, database, connectPrivilege, tls }

    /// The database went away or cannot be reached now (worth reconnecting to), not a bad query, URL or login:
    /// the connection broke, or the server ended the session (an admin, a shutdown, a crash: 57P01–57P03) or
    /// reported a connection exception (08).
    public var isConnectionLoss: Bool {
        switch self {
        case .connectionFailed: return refusedLogin == nil
        case .connectionLost: return true
        case .server(let server): return server.sqlState.hasPrefix("08") || server.sqlState.hasPrefix("57P")
        default: return false
        }
    }

    /// The SQLSTATE of a server error, if this is one.
    public var sqlState: String? {
        if case .server(let error) = self { return error.sqlState }
        return nil
    }

    /// A value that cannot be read as the type it is cast to: text that is no number, id or time (22P02,
    /// 22007), or a number or time out of range (22003, 22008). The data a statement read was at fault, not the
    /// statement or the server.
    public var isUnreadableValue: Bool { ["22P02", "22003", "22007", "22008"].contains(sqlState ?? "") }

    /// The rows a statement read or wrote were at fault, not the statement or the server: any data exception
    /// (class 22, `isUnreadableValue` among them), a constraint a row breaks (class 23), or a column that does
    /// not hold what the code reads (`decoding`).
    public var isDataAtFault: Bool {
        if case .decoding = self { return true }
        guard let state = sqlState else { return false }
        return state.hasPrefix("22") || state.hasPrefix("23")
    }
}

/// An error the server reported, with the fields a person needs to act on it.
public struct ServerError: Sendable, CustomStringConvertible {
    public var sqlState: String
    public var severity: String
    public var message: String
    public var hint: String?
    public var table: String?
    public var column: String?
    public var constraint: String?

    public var description: String {
        var text = "PostgreSQL \(severity) \(sqlState): \(message)"
        if let table { text += " (table \(table)" + (column.map { ", column \($0)" } ?? "") + ")" }
        if let constraint { text += " [constraint \(constraint)]" }
        if let hint { text += ". Hint: \(hint)" }
        return text
    }

    init(result: OpaquePointer) {
        func field(_ code: Int32) -> String? {
            guard let value = PQresultErrorField(result, code) else { return nil }
            return String(cString: value)
        }
        sqlState = field(Int32(CPQ_DIAG_SQLSTATE)) ?? "XX000"
        severity = field(Int32(CPQ_DIAG_SEVERITY_NONLOCALIZED)) ?? "ERROR"
        message = field(Int32(CPQ_DIAG_MESSAGE_PRIMARY)) ?? String(cString: PQresultErrorMessage(result))
        hint = field(Int32(CPQ_DIAG_MESSAGE_HINT))
        table = field(Int32(CPQ_DIAG_TABLE_NAME))
        column = field(Int32(CPQ_DIAG_COLUMN_NAME))
        constraint = field(Int32(CPQ_DIAG_CONSTRAINT_NAME))
    }
}

/// SQLSTATE codes the jobs react to.
public enum SQLState {
    public static let undefinedTable = "42P01"
    public static let uniqueViolation = "23505"
    public static let readOnlyTransaction = "25006"
    public static let queryCanceled = "57014"
    public static let lockNotAvailable = "55P03"
    public static let insufficientPrivilege = "42501"
    public static let serializationFailure = "40001"
    public static let deadlockDetected = "40P01"
}
