@testable import Delivery
import Testing

/// How many deliveries in doubt each careful claim keeps, and who may claim them.
struct CarefulClaimsTests {
    let careful = CarefulClaims()
    final class Engine {}
    let one = Engine(), other = Engine()
    var a: ObjectIdentifier { ObjectIdentifier(one) }
    var b: ObjectIdentifier { ObjectIdentifier(other) }

    @Test func lostOnceTheyDoubleFromOneToTheUsualClaim() {
        #expect(careful.limit(for: a, usual: 200) == nil, "not careful until a claim finds some")
        #expect((0..<10).map { _ in careful.keep(for: a, lostInARow: 1, ahead: false, usual: 200) } == [1, 2, 4, 8, 16, 32, 64, 128, 200, 200])
        #expect(careful.limit(for: a, usual: 200) == 200)
    }

    /// Lost twice in a row: a run died while they were out, in a careful batch of up to the usual size. Eight at
    /// most (all of them one at a time took a review's 1,023 such rows a round trip each); three times or more,
    /// one alone: it was among those few.
    @Test func lostTwiceAtMostEightAndThreeTimesAlone() {
        #expect((0..<6).map { _ in careful.keep(for: a, lostInARow: 2, ahead: false, usual: 200) } == [1, 2, 4, 8, 8, 8])
        #expect(careful.keep(for: a, lostInARow: 3, ahead: false, usual: 200) == 1)
        #expect(careful.keep(for: a, lostInARow: 5, ahead: false, usual: 200) == 1)
        #expect(careful.keep(for: a, lostInARow: 1, ahead: false, usual: 200) == 2, "doubling again from there")
    }

    @Test func anotherEngineWaitsUntilTheHolderEndsOrItsRunDoes() {
        #expect(careful.keep(for: a, lostInARow: 1, ahead: false, usual: 200) == 1)
        #expect(careful.limit(for: b, usual: 200) == 0 && careful.keep(for: b, lostInARow: 1, ahead: false, usual: 200) == 0)
        careful.release(for: a)
        #expect(careful.limit(for: b, usual: 200) == 2, "the holder's run ended: another takes over")
        #expect(careful.keep(for: b, lostInARow: 1, ahead: false, usual: 200) == 2)
        careful.end(for: b)
        #expect(careful.limit(for: a, usual: 200) == nil && careful.limit(for: b, usual: 200) == nil)
    }

    /// Said once while they last, and again for the next time (a long-lived engine said it once in its life).
    @Test func thePushesInDoubtAreSaidOnceEachTime() {
        #expect(careful.firstTimeSaid() && !careful.firstTimeSaid())
        _ = careful.keep(for: a, lostInARow: 1, ahead: false, usual: 200)
        careful.end(for: a)
        #expect(careful.firstTimeSaid(), "a later crash's are said again")
    }

    @Test func aClaimMadeAheadKeepsNoneAndTheNextIsCareful() {
        #expect(careful.keep(for: a, lostInARow: 1, ahead: true, usual: 200) == 0)
        #expect(careful.isCareful && careful.limit(for: a, usual: 200) == 1)
    }
}
