import Crypto
import Foundation
import Push
import Testing

/// The APNs provider token shared by every process that sends with one key (migration 0021): a process
/// uses the token in force, mints only when there is none it can use, and never overwrites a newer one.
struct SharedTokenTests {
    /// A store as the processes see it: compare-and-swap on the row; `racy` hides what is stored from
    /// `load`, as when two processes look at the same moment and both find nothing.
    final class MemoryStore: APNsTokenStore, @unchecked Sendable {
        var row: SealedAPNsToken?
        var racy = false
        var failing = false
        var replaced = 0
        func load(teamID: String, keyID: String) throws -> SealedAPNsToken? {
            if failing { throw CocoaError(.fileReadUnknown) }
            return racy ? nil : row
        }
        func replace(_ expected: SealedAPNsToken?, with new: SealedAPNsToken) throws -> SealedAPNsToken? {
            if failing { throw CocoaError(.fileWriteUnknown) }
            if row == expected { row = new; replaced += 1 }
            return row
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
        let store = MemoryStore()
        let first = try process(store) { start }
        let token = first.token()
        let second = try process(store) { start + 10 * 60 }
        #expect(second.token() == token)
        #expect(second.minted == 0)
        #expect(store.replaced == 1)
    }

    @Test func aTokenPastItsFiftyMinutesIsReplacedOnceAndTheOthersFollow() throws {
        let store = MemoryStore()
        var now = start
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
        let store = MemoryStore()
        store.racy = true
        let first = try process(store) { start }
        let second = try process(store) { start }
        let stored = first.token()
        #expect(second.token() == stored, "the second's own token lost the race and is not sent")
        #expect(second.minted == 1 && store.replaced == 1)
    }

    @Test func aRowSealedByAnotherKeyOrDamagedIsReplaced() throws {
        let store = MemoryStore()
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
        let store = MemoryStore()
        var now = start
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

    @Test func aFailingStoreLeavesTheProcessItsOwnToken() throws {
        let store = MemoryStore()
        store.failing = true
        let factory = try process(store) { start }
        let token = factory.token()
        #expect(!token.isEmpty)
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
