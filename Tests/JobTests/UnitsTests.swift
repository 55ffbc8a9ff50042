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
        // The daily jobs go again after a passing trouble; push-deliver, every minute anyway, does not (a restart
        // pending held its timer's next start back, during an outage every other minute).
        let template = try String(contentsOf: dir.appendingPathComponent("mentor-push@.service"), encoding: .utf8)
        #expect(template.contains("Restart=on-failure") && template.contains("StartLimitBurst="))
        let dropIn = try String(contentsOf: dir.appendingPathComponent("mentor-push@push-deliver.service.d/no-restart.conf"), encoding: .utf8)
        #expect(dropIn.contains("[Service]\nRestart=no"), "\(dropIn)")
        // systemd counts a timer's starts against StartLimitBurst= too: the template's 4 an hour, left in force for
        // push-deliver, failed its start from the 5th minute of every hour (start-limit-hit). The starts the
        // effective unit (template, then drop-in) allows per interval must cover one a minute.
        func setting(_ key: String, in text: String) -> String? {
            text.split(separator: "\n").last { $0.hasPrefix("\(key)=") }.map { String($0.dropFirst(key.count + 1)) }
        }
        let interval = setting("StartLimitIntervalSec", in: dropIn) ?? setting("StartLimitIntervalSec", in: template) ?? "10s"
        let burst = Int(setting("StartLimitBurst", in: dropIn) ?? setting("StartLimitBurst", in: template) ?? "5") ?? 5
        let seconds = interval == "0" || interval == "infinity" ? 0 : interval.hasSuffix("h") ? 3600 * (Int(interval.dropLast()) ?? 1)
            : interval.hasSuffix("min") ? 60 * (Int(interval.dropLast(3)) ?? 1) : Int(interval.filter(\.isNumber)) ?? 10
        #expect(seconds == 0 || burst >= seconds / 60 + 1, "push-deliver's every-minute timer is held to \(burst) starts per \(interval)")
        #expect(!FileManager.default.fileExists(atPath: dir.appendingPathComponent("mentor-push@prune.service.d").path))
    }

    /// "For a provider you do not use, drop its two lines": each provider's key is one LoadCredential= line and
    /// one Environment= line that names only it, so dropping both leaves the other provider whole (a shared
    /// Environment= line named both, and a host with one provider then exited 78 on every run).
    @Test func eachProvidersKeyIsTwoLinesOfItsOwn() throws {
        for unit in ["jobs/mentor-push@.service", "jobs/mentor-push-event-notify.service"] {
            let lines = try String(contentsOf: Paths.root.appendingPathComponent(unit), encoding: .utf8)
                .split(separator: "\n").map(String.init).filter { !$0.hasPrefix("#") }
            for (provider, variable) in [("apns.p8", "APNS_KEY_FILE"), ("fcm.json", "FCM_SERVICE_ACCOUNT_FILE")] {
                let own = lines.filter { $0.contains(provider) || $0.contains(variable) }
                #expect(own.count == 2, "\(unit): \(own)")
                #expect(own.contains { $0.hasPrefix("LoadCredential=\(provider):") }, "\(unit)")
                #expect(own.contains("Environment=\(variable)=%d/\(provider)"), "\(unit): \(own)")
            }
        }
    }

    /// What operators install passes systemd's own checks: `systemd-analyze verify` (syntax, known keys,
    /// the executable exists) and `systemd-analyze security` at an exposure of 2.0 or less, for the
    /// template as every job's instance, every timer, and event-notify's service.
    @Test func everyUnitVerifiesAndIsHardened() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("units-verify-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        #expect(try ProcessRunner.run(Paths.script("units"), [dir.path]).status == 0)
        try FileManager.default.copyItem(at: Paths.root.appendingPathComponent("jobs/mentor-push-event-notify.service"),
                                         to: dir.appendingPathComponent("mentor-push-event-notify.service"))
        // The units run /usr/local/bin/<job>; here, the executables this build made.
        let built = URL(fileURLWithPath: Paths.executable("event-notify")).deletingLastPathComponent().path
        for file in try FileManager.default.contentsOfDirectory(atPath: dir.path) where file.hasSuffix(".service") {
            let url = dir.appendingPathComponent(file)
            let text = try String(contentsOf: url, encoding: .utf8).replacingOccurrences(of: "/usr/local/bin/", with: built + "/")
            try text.write(to: url, atomically: true, encoding: .utf8)
        }
        let timers = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasSuffix(".timer") }.sorted()
        #expect(timers.count >= 5)
        let services = timers.map { "mentor-push@" + $0.dropFirst("mentor-push-".count).dropLast(".timer".count) + ".service" }
            + ["mentor-push-event-notify.service"]
        for unit in timers + services {
            let path = dir.appendingPathComponent(unit).path
            let verify = try ProcessRunner.run("/usr/bin/systemd-analyze", ["verify", path])
            #expect(verify.status == 0 && verify.stderr.isEmpty, "\(unit): \(verify.stderr)")
            guard unit.hasSuffix(".service") else { continue }
            let security = try ProcessRunner.run("/usr/bin/systemd-analyze", ["security", "--offline=true", "--threshold=20", path])
            let exposure = security.stdout.split(separator: "\n").last { $0.contains("Overall exposure level") } ?? "?"
            #expect(security.status == 0, "\(unit): exposure above 2.0: \(exposure)")
        }
    }

    /// The crontab's line for `job` as a command that runs here: the env file, the lock and the log moved into
    /// `dir`, and `/usr/local/bin/<job>` replaced by `program` (this build's job when nil).
    func cronCommand(_ job: String, in dir: URL, running program: String? = nil) throws -> String {
        let crontab = try String(contentsOf: Paths.root.appendingPathComponent("crontab"), encoding: .utf8)
        let line = try #require(crontab.split(separator: "\n").first { $0.contains("/usr/local/bin/\(job))") }, "no \(job) line in crontab")
        // The command is what follows the five time fields.
        return line.split(separator: " ", omittingEmptySubsequences: true).dropFirst(5).joined(separator: " ")
            .replacingOccurrences(of: "/etc/mentor-push/env", with: dir.appendingPathComponent("env").path)
            .replacingOccurrences(of: "/run/lock/", with: dir.path + "/")
            .replacingOccurrences(of: "/var/log/mentor-push/", with: dir.path + "/")
            .replacingOccurrences(of: "/usr/local/bin/\(job)", with: program ?? Paths.executable(job))
    }

    /// A crontab line hands its job what the env file says: the file holds plain `KEY=value` lines (systemd's
    /// `EnvironmentFile=` reads the same file), which a shell's `.` sets without exporting them. Here the
    /// prune line, with the paths moved into a scratch folder, must see the file's malformed setting.
    @Test func aCrontabLineHandsTheEnvFileToItsJob() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cron-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        try "DATABASE_URL=postgresql://cron@127.0.0.1:1/mentor\nPRUNE_BATCH_SIZE=abc\n"
            .write(to: dir.appendingPathComponent("env"), atomically: true, encoding: .utf8)
        let local = try cronCommand("prune", in: dir)
        // As cron starts it: none of the file's variables in the environment already (an inherited one would
        // be exported whatever the line does).
        let result = try ProcessRunner.run("/bin/sh", ["-c", "unset DATABASE_URL PRUNE_BATCH_SIZE METRICS_DIR; " + local])
        let log = try String(contentsOf: dir.appendingPathComponent("prune.log"), encoding: .utf8)
        #expect(result.status == 78, "\(local): \(log)")
        #expect(log.contains("PRUNE_BATCH_SIZE"), "the job did not see the env file's setting: \(log)")
    }

    /// An env file the line cannot read (missing, or readable by root only while the crontab is another user's):
    /// sh's `.` ended the line before its redirection, so the job's log said nothing and no metrics were written.
    /// The log says so and the line exits 78; a line of the file sh cannot take is said in the log too.
    @Test func aCrontabLineWhoseEnvFileCannotBeReadSaysSoInTheLog() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cron-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let command = try cronCommand("prune", in: dir, running: "/usr/bin/printenv DATABASE_URL")
        let missing = try ProcessRunner.run("/bin/sh", ["-c", command])
        let log = try String(contentsOf: dir.appendingPathComponent("prune.log"), encoding: .utf8)
        #expect(missing.status == 78, "\(log)")
        #expect(log.contains("prune: not run: cannot read \(dir.appendingPathComponent("env").path)"), "\(log)")
        try "DATABASE_URL='postgresql:///x\n".write(to: dir.appendingPathComponent("env"), atomically: true, encoding: .utf8)
        let broken = try ProcessRunner.run("/bin/sh", ["-c", command])
        let brokenLog = try String(contentsOf: dir.appendingPathComponent("prune.log"), encoding: .utf8)
        #expect(broken.status != 0 && broken.stderr.isEmpty, "\(broken.stderr)")
        #expect(brokenLog.count > log.count && !brokenLog.contains("postgresql:///x\n"), "sh's words are in the log, the job did not run: \(brokenLog)")
    }

    /// A database URL with an & (more than one parameter) and a $ (in a password), single-quoted as the crontab
    /// says: the job gets it whole. Bare, sh cut it at the & (the job saw no DATABASE_URL) and expanded the $.
    @Test func aQuotedValueOfTheEnvFileReachesTheJobWhole() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cron-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let url = "postgresql://cron:pa$word@db.example/mentor?sslmode=verify-full&sslrootcert=/etc/mentor-push/ca.pem"
        try "DATABASE_URL='\(url)'\n".write(to: dir.appendingPathComponent("env"), atomically: true, encoding: .utf8)
        let crontab = try String(contentsOf: Paths.root.appendingPathComponent("crontab"), encoding: .utf8)
        #expect(crontab.contains("KEY='value'"), "the crontab says how to write the env file")
        // printenv stands in for prune: it writes what it was given to its log.
        let command = try cronCommand("prune", in: dir, running: "/usr/bin/printenv DATABASE_URL")
        let result = try ProcessRunner.run("/bin/sh", ["-c", "unset DATABASE_URL; " + command])
        let log = try String(contentsOf: dir.appendingPathComponent("prune.log"), encoding: .utf8)
        #expect(result.status == 0, "\(command): \(log)")
        #expect(log == url + "\n", "\(log)")
    }

    /// A run cron starts while the previous one still runs is skipped: the log says so and the line exits 0.
    /// (flock -n alone exited 1 and said nothing.)
    @Test func aCrontabRunSkippedForTheLockSaysSoInTheLog() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cron-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        try "DATABASE_URL='postgresql:///x'\n".write(to: dir.appendingPathComponent("env"), atomically: true, encoding: .utf8)
        let command = try cronCommand("prune", in: dir, running: "/usr/bin/printenv DATABASE_URL")
        let lock = dir.appendingPathComponent("mentor-push-prune.lock").path
        // The previous run holds the lock for 3 s.
        let result = try ProcessRunner.run("/bin/sh", ["-c", "flock \(lock) sleep 3 & sleep 0.5; (\(command)); s=$?; wait; exit $s"])
        let log = try String(contentsOf: dir.appendingPathComponent("prune.log"), encoding: .utf8)
        #expect(result.status == 0, "\(log)")
        #expect(log.contains("prune: skipped: the previous run still holds"), "\(log)")
        #expect(!log.contains("postgresql:///x"), "the job did not run: \(log)")
    }

    /// A run that hangs (a frozen database backend, a stalled network) is stopped as the systemd unit's
    /// `TimeoutStartSec=30min` stops it: without a bound it held the lock for good and cron skipped every later
    /// run. Here the bound is cut to 1 s and the job is a sleep of 30: the line ends within seconds, says why in
    /// the log and exits 124 (timeout's status), so cron's mail tells the operator too.
    @Test func aHungCrontabRunIsStoppedAfterTheUnitsTimeout() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cron-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        try "DATABASE_URL='postgresql:///x'\n".write(to: dir.appendingPathComponent("env"), atomically: true, encoding: .utf8)
        let full = try cronCommand("push-deliver", in: dir, running: "/bin/sleep 30")
        #expect(full.contains(" 30m /bin/sleep 30"), "the line bounds the run by 30 minutes: \(full)")
        let command = full.replacingOccurrences(of: " 30m /bin/sleep 30", with: " 1s /bin/sleep 30")
        let started = Date()
        let result = try ProcessRunner.run("/bin/sh", ["-c", command])
        let log = try String(contentsOf: dir.appendingPathComponent("push-deliver.log"), encoding: .utf8)
        #expect(Date().timeIntervalSince(started) < 20, "the hung run was stopped")
        #expect(result.status == 124, "\(log)")
        #expect(log.contains("push-deliver: stopped after 30 minutes"), "\(log)")
    }

    /// A cron-only install runs event-notify too (drained every minute), or no event push ever goes out.
    @Test func theCrontabRunsEveryJobEventNotifyIncluded() throws {
        let crontab = try String(contentsOf: Paths.root.appendingPathComponent("crontab"), encoding: .utf8)
        let schedule = try String(contentsOf: Paths.root.appendingPathComponent("jobs/schedule"), encoding: .utf8)
        let jobs = schedule.split(separator: "\n").filter { !$0.hasPrefix("#") && !$0.isEmpty }
            .map { String($0.split(separator: "|")[0]).trimmingCharacters(in: .whitespaces) }
        for job in jobs + ["event-notify --once"] {
            #expect(crontab.contains("/usr/local/bin/\(job)) >>"), "no crontab line runs \(job)")
        }
        // Debian's cron (vixie cron 3.0) reads a command into a buffer of 1000 bytes (MAX_COMMAND).
        for line in crontab.split(separator: "\n") { #expect(line.utf8.count < 1000, "\(line.prefix(40))…: \(line.utf8.count) bytes") }
    }
}
