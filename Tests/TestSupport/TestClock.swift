import Foundation

/// A clock a test moves by hand, readable from any thread (the fake's event loops, the code under test).
public final class TestClock: @unchecked Sendable {
    private let lock = NSLock()
    private var current: Date

    public init(_ start: Date = Date()) { current = start }

    public var now: Date { lock.withLock { current } }

    public func advance(_ interval: TimeInterval) { lock.withLock { current += interval } }
}
