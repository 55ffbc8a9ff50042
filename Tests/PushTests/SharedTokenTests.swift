import Crypto
import Foundation
import Push
import Testing

/// The APNs provider token shared by every process that sends with one key (migration 0021): a process
/// uses the token in force, mints only when there is none it can use, and never overwrites a newer one.
struct SharedTokenTests {
    /// A store as the processes see it: compare-and-swap on the row; `racy` hides what is stored from
    /// `load`, as when two processes look at the same moment and both find nothing.
    /// Ages are by the store's own clock (`now`), as the database gives them.
    class MemoryStore: APNsTokenStore, @unchecked Sendable {
        var row: SealedAPNsToken?
        var racy = false
        var failing = false
        var replaced = 0
        var now: () -> Date
        init(now: @escaping () -> Date) { self.now = now }
        func aged(_ token: SealedAPNsToken?) -> (token: SealedAPNsToken, age: TimeInterval)? {
            token.map { ($0, now().timeIntervalSince1970 - Double($0.issuedAt)) }
        }
        func load(teamID: String, keyID: String) throws -> (token: SealedAPNsToken, age: TimeInterval)? {
            if failing { throw CocoaError(.fileReadUnknown) }
            return racy ? nil : aged(row)
        }
        func replace(_ expected: SealedAPNsToken?, with new: SealedAPNsToken) throws -> (token: SealedAPNsToken, age: TimeInterval)? {
            if failing { throw CocoaError(.fileWriteUnknown) }
            if row == expected { row = new; replaced += 1 }
            return aged(row)
        }
    }

    let key = P256.Signing.PrivateKey()
    let start = Date(timeIntervalSince1970: 1_781_510_400)

    func credentials(_ key: P256.Signing.PrivateKey) throws -> APNsCredentials {
        try APNsCredentials(privateKey: key, keyID: "ABC123DEFG", teamID: "DEF123GHIJ", topic: "no.likeperson.app")
    }

    /// A process: its own factory, sharing through `store`, on `clock`.
    func process(_ store: MemoryStore, clock: @escaping () -> Date) throws -> APNsTokenFactory {
        let factory = APNsTokenFactory(credentials: try credentials(key), clock: clock)
        factory.share(through: store)
        return factory
    }

    @Test func aProcessSendsTheTokenAnotherStoredAndMintsNone() throws {
        let store = MemoryStore { start + 10 * 60 }
        let first = try process(store) { start }
        let token = first.token()
        let second = try process(store) { start + 10 * 60 }
        #expect(second.token() == token)
        #expect(second.minted == 0)
        #expect(store.replaced == 1)
    }

    @Test func aTokenPastItsFiftyMinutesIsReplacedOnceAndTheOthersFollow() throws {
        var now = start
        let store = MemoryStore { now }
        let first = try process(store) { now }
        let second = try process(store) { now }
        let old = first.token()
        #expect(second.token() == old)
        now += 51 * 60
        let new = second.token()
        #expect(new != old)
        #expect(first.token() == new, "the first process takes the second's new token instead of minting its own")
        #expect(first.minted == 1 && second.minted == 1)
        #expect(store.replaced == 2)
    }

    @Test func twoProcessesMintingAtTheSameMomentBothSendTheOneStoredFirst() throws {
        let store = MemoryStore { start }
        store.racy = true
        let first = try process(store) { start }
        let second = try process(store) { start }
        let stored = first.token()
        #expect(second.token() == stored, "the second's own token lost the race and is not sent")
        #expect(second.minted == 1 && store.replaced == 1)
    }

    @Test func aRowSealedByAnotherKeyOrDamagedIsReplaced() throws {
        let store = MemoryStore { start + 60 }
        let rotated = APNsTokenFactory(credentials: try credentials(P256.Signing.PrivateKey()), clock: { start })
        rotated.share(through: store)
        let foreign = rotated.token()
        let current = try process(store) { start }
        let token = current.token()
        #expect(token != foreign)
        #expect(current.minted == 1)
        #expect(APNsTokenSeal(credentials: try credentials(key)).open(try #require(store.row)) == token)

        store.row?.sealed = Data(repeating: 7, count: 40)
        let next = try process(store) { start + 60 }
        #expect(next.token() != token)
        #expect(next.minted == 1)
    }

    @Test func anExpiredSharedTokenIsReplacedByOneProcessAndTheOthersTakeItsReplacement() throws {
        var now = start
        let store = MemoryStore { now }
        let first = try process(store) { now }
        let second = try process(store) { now }
        let expired = first.token()
        #expect(second.token() == expired)
        now += 25 * 60
        let fresh = try #require(first.refreshAfterExpiry(of: expired))
        #expect(fresh != expired)
        #expect(second.refreshAfterExpiry(of: expired) == fresh, "the second takes the first's replacement")
        #expect(first.minted == 2 && second.minted == 0)
    }

    @Test func aStoredTokenOlderThanThirtyMinutesIsNotTakenUpSoItCanBeKeptTwenty() throws {
        // APNs refuses a new token on a connection within 20 minutes of the last: a process that took up a
        // 45-minute-old token would have to drop it 5 minutes later, at 50.
        var now = start
        let store = MemoryStore { now }
        let first = try process(store) { now }
        let old = first.token()
        now += 35 * 60
        let second = try process(store) { now }
        let own = second.token()
        #expect(own != old)
        #expect(second.minted == 1)
        #expect(first.token() == old, "the first keeps its token until its 50 minutes")
        now += 60
        #expect(try process(store) { now }.token() == own, "a third takes the second's, now stored")
    }

    @Test func agesAreTheStoresSoASlowClockTakesUpAFreshToken() throws {
        var now = start
        let store = MemoryStore { now }
        let first = try process(store) { now }
        let token = first.token()
        now += 60
        // Five minutes slow: by its own clock the stored token was issued four minutes from now.
        let slow = try process(store) { now - 5 * 60 }
        #expect(slow.token() == token, "taken up, not overwritten by a token of its own")
        #expect(slow.minted == 0 && store.replaced == 1)
    }

    @Test func anExpiredAnswerWithinTheFloorTakesAReplacementAlreadyStored() throws {
        var now = start
        let store = MemoryStore { now }
        let first = try process(store) { now }
        let token = first.token()
        now += 5 * 60
        #expect(first.refreshAfterExpiry(of: token) == nil, "called expired at 5 minutes, and nothing else stored: the clock is off")
        let seal = APNsTokenSeal(credentials: try credentials(key))
        store.row = seal.seal("another-process-token", issuedAt: Int(now.timeIntervalSince1970))
        #expect(first.refreshAfterExpiry(of: token) == "another-process-token")
        #expect(first.minted == 1)
    }

    /// A store whose first `load` waits for `gate` (and then fails when `failFirst`): a refresh under way.
    final class SlowStore: MemoryStore, @unchecked Sendable {
        let entered = DispatchSemaphore(value: 0)
        let gate = DispatchSemaphore(value: 0)
        var slowLoads = 0
        var failFirst = false
        override func load(teamID: String, keyID: String) throws -> (token: SealedAPNsToken, age: TimeInterval)? {
            if slowLoads > 0 {
                slowLoads -= 1
                entered.signal()
                gate.wait()
                if failFirst { throw CocoaError(.fileReadUnknown) }
            }
            return try super.load(teamID: teamID, keyID: keyID)
        }
    }

    /// Runs `body` on a thread of its own; `result` waits for it (nil after `seconds`).
    final class Background: @unchecked Sendable {
        private let done = DispatchSemaphore(value: 0)
        private var value: String?
        init(_ body: @escaping @Sendable () -> String) {
            Thread { [self] in value = body(); done.signal() }.start()
        }
        func result(within seconds: Int) -> String? {
            done.wait(timeout: .now() + .seconds(seconds)) == .success ? value : nil
        }
    }

    @Test func whileOneThreadRefreshesThroughTheStoreTheOthersSendTheCurrentToken() throws {
        // The refresh is a database round trip: it must not hold up the pushes of every worker.
        let clock = LockedDate(start)
        let store = SlowStore { clock.now }
        let factory = try process(store) { clock.now }
        let old = factory.token()
        clock.now = start + 51 * 60
        store.slowLoads = 1
        let refresh = Background { factory.token() }
        #expect(store.entered.wait(timeout: .now() + 10) == .success)
        // Another caller, on a thread of its own so that a caller held up fails the test instead of hanging it.
        let other = Background { factory.token() }
        #expect(other.result(within: 5) == old, "another caller is not held up: it sends the current token")
        store.gate.signal()
        let fresh = try #require(refresh.result(within: 10))
        #expect(fresh != old)
        #expect(factory.token() == fresh)
    }

    @Test func aRefreshThatFailsDoesNotUndoAReplacementMadeMeanwhile() throws {
        // While one thread's look in the store hangs and then fails, another's ExpiredProviderToken replaces
        // the token: the providers switch once, not twice within seconds (TooManyProviderTokenUpdates).
        let clock = LockedDate(start)
        let store = SlowStore { clock.now }
        let factory = try process(store) { clock.now }
        let old = factory.token()
        clock.now = start + 51 * 60
        store.slowLoads = 1
        store.failFirst = true
        let refresh = Background { factory.token() }
        #expect(store.entered.wait(timeout: .now() + 10) == .success)
        let replacement = try #require(factory.refreshAfterExpiry(of: old))
        #expect(replacement != old)
        store.gate.signal()
        #expect(refresh.result(within: 10) == replacement)
        #expect(factory.token() == replacement)
        #expect(factory.minted == 2, "no third token minted by the failed refresh")
    }

    @Test func manyThreadsAskingForTheFirstTokenAtOnceGetOne() throws {
        let store = MemoryStore { start }
        let factory = try process(store) { start }
        let lock = NSLock()
        nonisolated(unsafe) var tokens = Set<String>()
        DispatchQueue.concurrentPerform(iterations: 16) { _ in
            let token = factory.token()
            lock.withLock { _ = tokens.insert(token) }
        }
        #expect(tokens.count == 1)
        #expect(factory.minted == 1 && store.replaced == 1)
    }

    @Test func aFailingStoreLeavesTheProcessItsOwnToken() throws {
        let store = MemoryStore { start }
        store.failing = true
        let factory = try process(store) { start }
        let token = factory.token()
        #expect(token.split(separator: ".").count == 3, "a JWT of its own")
        #expect(factory.token() == token)
        #expect(factory.minted == 1)
    }

    @Test func theSealedTokenIsNotTheTokenAndOpensOnlyWithItsKeyTeamAndTime() throws {
        let seal = APNsTokenSeal(credentials: try credentials(key))
        let token = APNsTokenFactory(credentials: try credentials(key), clock: { start }).token()
        let sealed = seal.seal(token, issuedAt: 1_781_510_400)
        #expect(sealed.sealed.range(of: Data(token.utf8)) == nil)
        #expect(sealed.sealed.range(of: Data(token.prefix(20).utf8)) == nil)
        #expect(seal.open(sealed) == token)
        var moved = sealed
        moved.issuedAt += 1
        #expect(seal.open(moved) == nil, "bound to its issue time")
        moved = sealed
        moved.teamID = "ZZZ123GHIJ"
        #expect(seal.open(moved) == nil, "bound to its team")
        #expect(APNsTokenSeal(credentials: try credentials(P256.Signing.PrivateKey())).open(sealed) == nil)
    }
}

/// A date several threads read and set.
final class LockedDate: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Date
    init(_ value: Date) { self.value = value }
    var now: Date {
        get { lock.withLock { value } }
        set { lock.withLock { value = newValue } }
    }
}
