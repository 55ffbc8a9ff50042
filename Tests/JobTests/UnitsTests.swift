import Foundation
import Testing
import TestSupport

/// The schedule lives in one place (jobs/schedule); the crontab and the systemd timers are made from it.
@Suite struct UnitsTests {
    @Test func theCommittedCrontabIsTheOneTheScheduleMakes() throws {
        let generated = try ProcessRunner.run(Paths.script("units"), ["--crontab"])
        #expect(generated.status == 0, "stderr: \(generated.stderr)")
        let committed = try String(contentsOf: Paths.root.appendingPathComponent("crontab"), encoding: .utf8)
        #expect(generated.stdout == committed, "run scripts/units --crontab > crontab")
    }

    @Test func everyJobHasATimerForTheOneTemplateUnit() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("units-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let result = try ProcessRunner.run(Paths.script("units"), [dir.path])
        #expect(result.status == 0, "stderr: \(result.stderr)")
        let files = Set(try FileManager.default.contentsOfDirectory(atPath: dir.path))
        for job in ["inactivity-check", "assignment-follow-up", "overdue-digest", "impact-summary", "push-deliver", "prune"] {
            #expect(files.contains("mentor-push-\(job).timer"), "\(job)")
            #expect(FileManager.default.isExecutableFile(atPath: Paths.executable(job)), "\(job) is built")
        }
        #expect(files.contains("mentor-push@.service"))
        let timer = try String(contentsOf: dir.appendingPathComponent("mentor-push-overdue-digest.timer"), encoding: .utf8)
        #expect(timer.contains("Unit=mentor-push@overdue-digest.service"))
    }
}
