import CLibPQ
import Foundation

/// One libpq connection (`PGconn`), closed when the object goes away.
///
/// Thread rules: libpq connections are not thread-safe. Use a `Connection` from one thread (or task)
/// at a time; open one per concurrent worker. It is deliberately not `Sendable`.
public final class Connection {
    private let handle: OpaquePointer
    /// When true, each distinct statement is prepared on first use and executed by name after that: the
    /// server parses and plans it once per session instead of every time. For the loops that run the same
    /// few statements thousands of times (event-notify, push-deliver); a one-off job gains nothing.
    public var preparesStatements = false
    /// Prepared statements of this session, by SQL text.
    private var prepared: [String: String] = [:]
    /// What `init` was given, for `sibling(applicationName:)`. Never printed: it may hold a password.
    private let url: String?
    private let statementTimeout: Duration

    /// libpq's words for a service it cannot find (`PGSERVICE`, `service=`, `PGSERVICEFILE`).
    static let refusedSettings = ["definition of service \"", "service file \"", "syntax error in service file \""]
    /// The server's words (after FATAL) for startup options it refuses (`options=-c …`, `PGOPTIONS`).
    static let refusedOptions = ["invalid value for parameter \"", "unrecognized configuration parameter \"",
                                 "is outside the valid range for parameter \"", "invalid command-line argument",
                                 "cannot be changed", "cannot be set after connection start", "requires a Boolean value",
                                 "requires a numeric value", "requires a value", "permission denied to set parameter \""]

    /// Connects with a URL or key/value connection string, or with nil to let libpq apply its own
    /// conventions (`PG*` variables, the service file, `.pgpass`, `sslmode`). A string libpq cannot
    /// parse throws `invalidConnectionString`, settings refused for good that are not the string's text `invalidSettings`;
    /// no error repeats the string or a password in it. The session then runs in
    /// UTC with ISO dates, under `statementTimeout`, and shows `applicationName` in `pg_stat_activity`.
    public init(url: String?, applicationName: String, statementTimeout: Duration = .seconds(300)) throws {
        // Keywords are applied in order and a later one wins: connect_timeout may be overridden by the
        // URL, application_name and client_encoding may not.
        var keywords: [String] = []
        var values: [String] = []
        if ProcessInfo.processInfo.environment["PGCONNECT_TIMEOUT"] == nil {
            keywords.append("connect_timeout"); values.append("10")
        }
        // A server gone without a word (its host lost power, a firewall forgot the connection) is noticed in
        // about a minute, not after the system's two hours of TCP keepalive: a query waiting on it fails
        // and the job reconnects or exits 69. The URL may say otherwise.
        for (keyword, value) in Connection.keepalives { keywords.append(keyword); values.append(value) }
        if let url, !url.isEmpty {
            if let problem = ConnectionString.problem(url) { throw PostgresError.invalidConnectionString(message: problem) }
            keywords.append("dbname"); values.append(url)
        }
        keywords.append("application_name"); values.append(applicationName)
        keywords.append("client_encoding"); values.append("UTF8")

        let connection: OpaquePointer? = withCStringArray(keywords) { k in
            withCStringArray(values) { v in PQconnectdbParams(k, v, 1) }
        }
        guard let connection else { throw PostgresError.connectionFailed(message: "out of memory") }
        guard PQstatus(connection) == CONNECTION_OK else {
            var message = Connection.trimmed(PQerrorMessage(connection))
            if let url { message = ConnectionString.redact(message, connectionString: url) }
            PQfinish(connection)
            // A value libpq refused before trying any server (a port of 99999, `sslmode=bogus`): the setting
            // is wrong, and trying again will not help.
            // libpq reads some only as it connects, and says so after the server's name ("connection to server on
            // socket … failed: invalid integer value "abc" for connection option "connect_timeout"").
            let refusedByLibpq = message.hasPrefix("invalid ") || message.hasPrefix("could not match ") || message.contains(" for connection option \"")
            if refusedByLibpq, let url, !url.isEmpty {
                // Beside a URL that does not set it, the value is a PG* variable's: named, as its message has it.
                if let variable = ConnectionString.variableRefused(in: message, url: url) {
                    throw PostgresError.invalidSettings(message: "\(variable) (not set in the URL): \(message)")
                }
                throw PostgresError.invalidConnectionString(message: message)
            }
            // The same without a URL is a PG* variable's value; a service libpq cannot find is a setting too, and so are
            // startup options the server refuses (it ends the session before it begins: every try fails alike).
            if refusedByLibpq || Connection.refusedSettings.contains(where: message.contains)
                || message.contains("FATAL:") && Connection.refusedOptions.contains(where: message.contains) {
                throw PostgresError.invalidSettings(message: message)
            }
            throw PostgresError.connectionFailed(message: message)
        }
        handle = connection
        self.url = url
        self.statementTimeout = statementTimeout
        PQsetNoticeProcessor(handle, { _, _ in }, nil)
        let milliseconds = statementTimeout.components.seconds * 1000 + statementTimeout.components.attoseconds / 1_000_000_000_000_000
        try execute("SET TimeZone = 'UTC'")
        try execute("SET DateStyle = 'ISO, YMD'")
        try execute("SET IntervalStyle = 'iso_8601'")
        // Our statements are short and indexed: JIT compilation (tens of milliseconds) never pays off.
        try execute("SET jit = off")
        // With the statement timeout, in the same round trip, the keepalives the other way: a job whose host lost
        // power leaves a session that holds its locks (the job's own lock, rows of the queue) until the server
        // notices. With these it does in about a minute, so the job's rerun at boot is not turned away as already
        // running. Ignored over a Unix socket.
        try execute("""
            SELECT set_config('statement_timeout', \(String(milliseconds)), false),
                   set_config('tcp_keepalives_idle', '30', false), set_config('tcp_keepalives_interval', '10', false),
                   set_config('tcp_keepalives_count', '3', false), set_config('tcp_user_timeout', '60000', false)
            """)
    }

    /// libpq's TCP keepalives: the first probe after 30 s of silence, then every 10 s, given up after 3 (and
    /// data unacknowledged for 60 s ends the connection too).
    static let keepalives = [("keepalives", "1"), ("keepalives_idle", "30"), ("keepalives_interval", "10"),
                             ("keepalives_count", "3"), ("tcp_user_timeout", "60000")]

    /// The value of a connection option in effect (libpq's `PQconninfo`), e.g. `keepalives_idle`.
    public func option(_ keyword: String) -> String? {
        guard let options = PQconninfo(handle) else { return nil }
        defer { PQconninfoFree(options) }
        var option = options
        while let name = option.pointee.keyword {
            if String(cString: name) == keyword { return option.pointee.val.map { String(cString: $0) } }
            option += 1
        }
        return nil
    }

    deinit { PQfinish(handle) }

    /// A new connection to the same database with the same settings (the statement timeout too, unless
    /// given), for work that must not share this one's session or thread.
    public func sibling(applicationName: String, statementTimeout: Duration? = nil) throws -> Connection {
        try Connection(url: url, applicationName: applicationName, statementTimeout: statementTimeout ?? self.statementTimeout)
    }

    /// The server's version number, e.g. 150018.
    public var serverVersion: Int { Int(PQserverVersion(handle)) }

    /// Runs a statement and returns all of its rows. With `binary`, rows come in PostgreSQL's binary
    /// format (see `stream`).
    @discardableResult
    public func query(_ query: Query, binary: Bool = false) throws -> QueryResult {
        let name = try preparedName(query)
        let format: Int32 = binary ? 1 : 0
        let result = try withParameters(query.parameters) { count, values in
            if let name { return PQexecPrepared(handle, name, count, values, nil, nil, format) }
            return PQexecParams(handle, query.sql, count, nil, values, nil, nil, format)
        }
        return QueryResult(try check(result))
    }

    /// Runs a statement for its effect; returns the number of rows it touched.
    @discardableResult
    public func execute(_ query: Query) throws -> Int {
        let result = try self.query(query)
        return result.affectedRows
    }

    /// Runs a query and hands each row to `body` as it arrives (libpq's single-row mode), so memory
    /// stays flat however many rows the query returns. If `body` throws, the query is cancelled.
    /// With `binary`, rows come in PostgreSQL's binary format: the server formats nothing and the
    /// decoders parse nothing (columns must be of the types `PostgresDecodable` reads in binary).
    public func stream(_ query: Query, binary: Bool = false, _ body: (Row) throws -> Void) throws {
        let name = try preparedName(query)
        let sent = try withParameters(query.parameters) { count, values in
            if let name { return PQsendQueryPrepared(handle, name, count, values, nil, nil, binary ? 1 : 0) }
            return PQsendQueryParams(handle, query.sql, count, nil, values, nil, nil, binary ? 1 : 0)
        }
        guard sent == 1 else { throw PostgresError.connectionLost(message: errorMessage) }
        guard PQsetSingleRowMode(handle) == 1 else { throw PostgresError.connectionLost(message: errorMessage) }
        var failure: Error? = nil
        while let result = PQgetResult(handle) {
            defer { PQclear(result) }
            if failure != nil { continue } // drain what is left after a cancel or an error
            switch PQresultStatus(result) {
            case PGRES_SINGLE_TUPLE:
                do { try body(Row(result: result, row: 0)) } catch {
                    failure = error
                    cancel()
                }
            case PGRES_TUPLES_OK, PGRES_COMMAND_OK:
                break
            default:
                failure = resultError(result)
            }
        }
        if let failure { throw failure }
    }

    /// Runs a trusted multi-statement SQL script as it is (a migration file). Takes no parameters:
    /// never pass it text that came from a user or a database row.
    public func runScript(_ sql: String) throws {
        if sql.utf8.contains(0) { throw PostgresError.encoding(reason: "the script holds a NUL byte") }
        PQclear(try check(PQexec(handle, sql)))
    }

    /// Whether a transaction is open on this connection (a `transaction` call now joins it).
    public var inTransaction: Bool { PQtransactionStatus(handle) != PQTRANS_IDLE }

    /// Runs `body` in a transaction: committed if it returns, rolled back if it throws. Inside a
    /// transaction already open on this connection, `body` simply joins it (the outer one decides).
    @discardableResult
    public func transaction<T>(_ mode: TransactionMode = .readWrite, _ body: () throws -> T) throws -> T {
        if inTransaction { return try body() }
        try execute(mode.begin)
        do {
            let value = try body()
            try execute("COMMIT")
            return value
        } catch {
            if PQstatus(handle) == CONNECTION_OK { _ = try? execute("ROLLBACK") }
            throw error
        }
    }

    /// Subscribes this session to `channel`'s notifications (`NOTIFY channel`).
    public func listen(_ channel: StaticString) throws {
        try runScript("LISTEN \(channel)")
    }

    /// Waits up to `timeout` for a notification on a channel this session listens to, and takes every one
    /// that arrived. Returns how many. A lost connection throws.
    public func waitForNotifications(timeout: Duration) throws -> Int {
        var taken = try takeNotifications()
        if taken > 0 { return taken }
        var descriptor = pollfd(fd: PQsocket(handle), events: Int16(POLLIN), revents: 0)
        guard descriptor.fd >= 0 else { throw PostgresError.connectionLost(message: errorMessage) }
        let milliseconds = Int32(clamping: timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)
        let ready = poll(&descriptor, 1, milliseconds)
        if ready > 0 { taken = try takeNotifications() }
        return taken
    }

    /// Waits up to `timeout` for notifications on `channel` (this session listens to it) and returns their
    /// payloads, every one that arrived (notifications on other channels are dropped). A lost connection throws.
    public func waitForPayloads(on channel: String, timeout: Duration) throws -> [String] {
        var descriptor = pollfd(fd: PQsocket(handle), events: Int16(POLLIN), revents: 0)
        guard descriptor.fd >= 0 else { throw PostgresError.connectionLost(message: errorMessage) }
        let milliseconds = Int32(clamping: timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)
        guard poll(&descriptor, 1, milliseconds) > 0 else { return [] }
        guard PQconsumeInput(handle) == 1 else { throw PostgresError.connectionLost(message: errorMessage) }
        var payloads: [String] = []
        while let notification = PQnotifies(handle) {
            if String(cString: notification.pointee.relname) == channel { payloads.append(String(cString: notification.pointee.extra)) }
            PQfreemem(notification)
        }
        return payloads
    }

    private func takeNotifications() throws -> Int {
        guard PQconsumeInput(handle) == 1 else { throw PostgresError.connectionLost(message: errorMessage) }
        var count = 0
        while let notification = PQnotifies(handle) {
            PQfreemem(notification)
            count += 1
        }
        return count
    }

    /// Asks the server to stop the statement in progress.
    public func cancel() {
        guard let cancel = PQgetCancel(handle) else { return }
        var buffer = [CChar](repeating: 0, count: 256)
        _ = PQcancel(cancel, &buffer, 256)
        PQfreeCancel(cancel)
    }

    // MARK: - libpq plumbing

    /// The name `query`'s statement is prepared under (preparing it now if it is new), or nil when this
    /// connection does not prepare statements.
    private func preparedName(_ query: Query) throws -> String? {
        guard preparesStatements else { return nil }
        if let name = prepared[query.sql] { return name }
        let name = "s\(prepared.count + 1)"
        PQclear(try check(PQprepare(handle, name, query.sql, Int32(query.parameters.count), nil)))
        prepared[query.sql] = name
        return name
    }

    private var errorMessage: String { Connection.trimmed(PQerrorMessage(handle)) }

    /// libpq's message on one line: its lines (a hint under a connection failure, one line per host tried)
    /// joined by "; ". The log shows a line break in a message as U+FFFD, which read
    /// "Connection refused\u{FFFD}\u{FFFD}Is the server running…".
    static func trimmed(_ message: UnsafePointer<CChar>?) -> String {
        guard let message else { return "unknown error" }
        return String(cString: message).split(whereSeparator: \.isNewline)
            .map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }.joined(separator: "; ")
    }

    private func check(_ result: OpaquePointer?) throws -> OpaquePointer {
        guard let result else { throw PostgresError.connectionLost(message: errorMessage) }
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK, PGRES_TUPLES_OK, PGRES_EMPTY_QUERY:
            return result
        default:
            let error = resultError(result)
            PQclear(result)
            throw error
        }
    }

    private func resultError(_ result: OpaquePointer) -> PostgresError {
        if PQresultErrorField(result, Int32(CPQ_DIAG_SQLSTATE)) != nil {
            return .server(ServerError(result: result))
        }
        return .connectionLost(message: errorMessage)
    }

    private func withParameters<R>(_ parameters: [String?], _ body: (Int32, UnsafePointer<UnsafePointer<CChar>?>?) throws -> R) throws -> R {
        var pointers: [UnsafeMutablePointer<CChar>?] = []
        pointers.reserveCapacity(parameters.count)
        defer { pointers.forEach { free($0) } }
        for (index, parameter) in parameters.enumerated() {
            guard let parameter else { pointers.append(nil); continue }
            if parameter.utf8.contains(0) {
                throw PostgresError.encoding(reason: "parameter $\(index + 1) holds a NUL byte, which PostgreSQL text cannot store")
            }
            pointers.append(strdup(parameter))
        }
        return try pointers.withUnsafeBufferPointer { buffer in
            try buffer.baseAddress!.withMemoryRebound(to: UnsafePointer<CChar>?.self, capacity: max(buffer.count, 1)) {
                try body(Int32(parameters.count), parameters.isEmpty ? nil : $0)
            }
        }
    }
}

/// How a transaction begins.
public enum TransactionMode: Sendable {
    case readWrite
    /// Read only, in one snapshot: what `--dry-run` uses, so it cannot write even by mistake.
    case readOnly

    var begin: Query {
        switch self {
        case .readWrite: return "BEGIN"
        case .readOnly: return "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
        }
    }
}

/// All rows of a finished statement. Owns libpq's result and frees it.
public final class QueryResult: Sequence {
    let result: OpaquePointer

    init(_ result: OpaquePointer) { self.result = result }
    deinit { PQclear(result) }

    public var count: Int { Int(PQntuples(result)) }

    /// Rows touched by an INSERT, UPDATE or DELETE.
    public var affectedRows: Int { Int(String(cString: PQcmdTuples(result))) ?? 0 }

    public subscript(_ index: Int) -> Row { Row(result: result, row: Int32(index), owner: self) }

    /// The first row, if any.
    public var first: Row? { count > 0 ? self[0] : nil }

    public func makeIterator() -> AnyIterator<Row> {
        var index = 0
        return AnyIterator {
            guard index < self.count else { return nil }
            defer { index += 1 }
            return self[index]
        }
    }
}

private func withCStringArray<R>(_ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> R) -> R {
    var pointers: [UnsafeMutablePointer<CChar>?] = strings.map { strdup($0) }
    pointers.append(nil)
    defer { pointers.forEach { free($0) } }
    return pointers.withUnsafeBufferPointer { buffer in
        buffer.baseAddress!.withMemoryRebound(to: UnsafePointer<CChar>?.self, capacity: buffer.count) { body($0) }
    }
}
