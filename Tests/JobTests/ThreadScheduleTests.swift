import Foundation
import JobKit
import Testing

@Suite struct ThreadScheduleTests {
    @Test func aBusyThreadsTimeOnACoreGrowsByWhatItSpent() throws {
        let start = try #require(ThreadSchedule.current(), "Linux keeps /proc/thread-self/schedstat")
        let clock = ContinuousClock()
        let busyUntil = clock.now + .milliseconds(60)
        var spin = 0
        while clock.now < busyUntil { spin &+= 1 }
        let spent = try #require(ThreadSchedule.current()).since(start)
        #expect(spent.running >= .milliseconds(20), "on a core for most of 60 ms of spinning: \(spent.running) (\(spin) turns)")
        #expect(spent.running <= .milliseconds(200))
        #expect(spent.running + spent.waiting <= .milliseconds(500), "time on a core and waiting for one add up to at most the wall time")
    }
}
