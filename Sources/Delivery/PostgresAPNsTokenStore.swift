import Foundation
import Logging
import Postgres
import Push

/// The APNs provider token in force, kept in `apns_provider_tokens` (migration 0021) for every process
/// that sends with the key. Reached on a connection of its own (a sibling of the job's, with a 10-second
/// statement timeout), opened for each look (once per process, and once per token's 50 minutes): the
/// pushes are sent from a thread whose job connection may be busy. A failure is logged and the process
/// sends a token of its own.
public final class PostgresAPNsTokenStore: APNsTokenStore, @unchecked Sendable {
    private let open: () throws -> Connection
    private let logger: Logger

    public init(siblingOf connection: Connection, logger: Logger) {
        open = { [connection] in try connection.sibling(applicationName: "mentor-push apns token", statementTimeout: .seconds(10)) }
        self.logger = logger
    }

    public func load(teamID: String, keyID: String) throws -> (token: SealedAPNsToken, age: TimeInterval)? {
        try logged("read") {
            try read(teamID: teamID, keyID: keyID, on: try open())
        }
    }

    public func replace(_ expected: SealedAPNsToken?, with new: SealedAPNsToken) throws -> (token: SealedAPNsToken, age: TimeInterval)? {
        try logged("store") {
            let connection = try open()
            let issuedAt = Double(new.issuedAt)
            let sealed = new.sealed.base64EncodedString()
            if let expected {
                // Only while the row is still the one read (its time compared as `read` gives it, whole seconds):
                // another process's newer token is never overwritten.
                _ = try connection.execute("""
                    UPDATE apns_provider_tokens SET issued_at = to_timestamp(\(issuedAt)::float8), sealed = decode(\(sealed), 'base64')
                     WHERE team_id = \(new.teamID) AND key_id = \(new.keyID)
                       AND extract(epoch FROM issued_at)::bigint = \(expected.issuedAt) AND sealed = decode(\(expected.sealed.base64EncodedString()), 'base64')
                    """)
            } else {
                _ = try connection.execute("""
                    INSERT INTO apns_provider_tokens (team_id, key_id, issued_at, sealed)
                    VALUES (\(new.teamID), \(new.keyID), to_timestamp(\(issuedAt)::float8), decode(\(sealed), 'base64'))
                    ON CONFLICT (team_id, key_id) DO NOTHING
                    """)
            }
            // Read afresh, ours or the row another process committed first, for its age by the database's clock.
            return try read(teamID: new.teamID, keyID: new.keyID, on: connection)
        }
    }

    private func read(teamID: String, keyID: String, on connection: Connection) throws -> (token: SealedAPNsToken, age: TimeInterval)? {
        try connection.query("""
            SELECT extract(epoch FROM issued_at)::bigint, encode(sealed, 'base64'), extract(epoch FROM now() - issued_at)::float8
              FROM apns_provider_tokens WHERE team_id = \(teamID) AND key_id = \(keyID)
            """).first.map { row in
            (SealedAPNsToken(teamID: teamID, keyID: keyID, issuedAt: try row.decode(0),
                             sealed: Data(base64Encoded: try row.decode(1, as: String.self), options: .ignoreUnknownCharacters) ?? Data()),
             try row.decode(2, as: Double.self))
        }
    }

    private func logged<T>(_ what: String, _ body: () throws -> T) throws -> T {
        do { return try body() } catch {
            logger.warning("apns: cannot \(what) the shared provider token (\(error)): this process sends a token of its own")
            throw error
        }
    }
}
