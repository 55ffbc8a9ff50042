import Foundation

/// A value guarded by a lock, for collecting results from concurrent work in tests.
public final class Locked<Value>: @unchecked Sendable {
    private var value: Value
    private let lock = NSLock()
    public init(_ value: Value) { self.value = value }
    public func withLock<R>(_ body: (inout Value) -> R) -> R { lock.withLock { body(&value) } }
}
