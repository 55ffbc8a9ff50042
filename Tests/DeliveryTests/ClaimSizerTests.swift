@testable import Delivery
import Testing

/// The size of each claim ahead: a quarter second's worth at the pace measured since the last claim,
/// from two windows to the maximum.
struct ClaimSizerTests {
    let start = ContinuousClock.now

    @Test func theFirstClaimIsTwoWindows() {
        var sizer = ClaimSizer(window: 100, maximum: 4000, now: start)
        #expect(sizer.size == 200)
        #expect(sizer.next(now: start) == 200, "no time has passed: no pace yet")
    }

    @Test func aClaimTakesAQuarterSecondAtThePaceSinceTheLastOne() {
        var sizer = ClaimSizer(window: 100, maximum: 4000, now: start)
        for _ in 0..<300 { sizer.completedOne() }
        // 300 answers in 100 ms: 3,000/s, so 750 in a quarter second.
        #expect(sizer.next(now: start + .milliseconds(100)) == 750)
        #expect(sizer.size == 750)
        // Measuring starts again: 20 answers in the next 100 ms is 200/s, below two windows.
        for _ in 0..<20 { sizer.completedOne() }
        #expect(sizer.next(now: start + .milliseconds(200)) == 200)
    }

    @Test func aFastPaceIsCappedAtTheMaximum() {
        var sizer = ClaimSizer(window: 100, maximum: 4000, now: start)
        for _ in 0..<100_000 { sizer.completedOne() }
        #expect(sizer.next(now: start + .milliseconds(1)) == 4000)
    }

    @Test func aMaximumBelowTwoWindowsWins() {
        var sizer = ClaimSizer(window: 100, maximum: 50, now: start)
        #expect(sizer.size == 50)
        for _ in 0..<10_000 { sizer.completedOne() }
        #expect(sizer.next(now: start + .seconds(1)) == 50)
    }
}
