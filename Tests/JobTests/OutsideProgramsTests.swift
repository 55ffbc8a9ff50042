import Foundation
import Testing
import TestSupport

/// A fresh machine has only what `make test` installs: every outside program a test runs must come from a
/// package `scripts/install-deps` names (or one of their dependencies, or Debian's essential set). A program
/// that happens to be on the developer's machine and nowhere else fails here, not on the next machine.
@Suite struct OutsideProgramsTests {

    /// What the scripts the tests start call (`scripts/pg-cluster`): the PostgreSQL server's tools.
    static let scriptPrograms = ["initdb", "pg_ctl", "postgres"]

    @Test func everyProgramTheTestsRunComesFromInstallDeps() throws {
        let programs = try Self.programsTheTestsRun()
        // A scan that found nothing would pass whatever the tests ran.
        #expect(programs.contains("/usr/bin/nghttp") && programs.contains("/usr/bin/openssl"), "the scan missed known programs: \(programs)")
        let packages = try Self.installedPackages()
        let installed = Self.closure(of: try Self.installDepsPackages(), in: packages)
        for program in programs {
            guard let owner = try Self.package(owning: program) else {
                Issue.record("\(program) is not from a Debian package on this machine: install it through scripts/install-deps")
                continue
            }
            #expect(installed.contains(owner) || packages[owner]?.essential == true,
                    "\(program) comes from the package \(owner), which scripts/install-deps does not install: add it there")
        }
    }

    @Test func testsRunNoProgramThroughEnv() throws {
        for (file, text) in try Self.testSources() where text.contains("\"/usr/bin/env\"") {
            Issue.record("\(file) runs a program through /usr/bin/env: name it by its absolute path, so the install check sees it")
        }
    }

    // MARK: - What the tests run

    static func testSources() throws -> [(String, String)] {
        let tests = Paths.root.appendingPathComponent("Tests")
        let files = FileManager.default.enumerator(atPath: tests.path)?.compactMap { $0 as? String }.filter { $0.hasSuffix(".swift") } ?? []
        return try files.sorted().map { ($0, try String(contentsOf: tests.appendingPathComponent($0), encoding: .utf8)) }
    }

    static func programsTheTestsRun() throws -> Set<String> {
        var programs = Set<String>()
        for (file, text) in try testSources() where file != "JobTests/OutsideProgramsTests.swift" {
            // Tests name the programs they run by absolute path (`"/usr/bin/nghttp"`), never through `env`
            // and PATH, so this sees each one.
            for match in text.matches(of: #/"(/(?:usr/)?s?bin/[A-Za-z0-9._+-]+)"/#) { programs.insert(String(match.1)) }
        }
        let serverBin = (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql"))?
            .sorted { $0.compare($1, options: .numeric) == .orderedAscending }.last.map { "/usr/lib/postgresql/\($0)/bin" }
        if let serverBin {
            for name in scriptPrograms { programs.insert("\(serverBin)/\(name)") }
        } else {
            Issue.record("no PostgreSQL server under /usr/lib/postgresql: scripts/install-deps installs it")
        }
        return programs
    }

    // MARK: - Debian's package database

    /// The package that installed `path` (as given, or where its symlinks lead; /usr/bin also as /bin).
    static func package(owning path: String) throws -> String? {
        let real = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
        for candidate in [path, real, path.replacingOccurrences(of: "/usr/", with: "/"), real.replacingOccurrences(of: "/usr/", with: "/")] {
            let result = try ProcessRunner.run("/usr/bin/dpkg-query", ["--search", candidate])
            guard result.status == 0 else { continue }
            for line in result.stdout.split(separator: "\n") where !line.hasPrefix("diversion") {
                if let name = line.split(separator: ":").first { return String(name).split(separator: ",").first.map(String.init) }
            }
        }
        return nil
    }

    struct Package { var depends: [String]; var essential: Bool }

    /// Every installed package, with what it depends on (each alternative counted) and whether Debian
    /// treats it as always there (Essential, or priority required).
    static func installedPackages() throws -> [String: Package] {
        let result = try ProcessRunner.run("/usr/bin/dpkg-query", ["--show", "--showformat", "${Package}\t${Status}\t${Essential}\t${Priority}\t${Pre-Depends}, ${Depends}\n"])
        try #require(result.status == 0, "dpkg-query: \(result.stderr)")
        var packages: [String: Package] = [:]
        for line in result.stdout.split(separator: "\n") {
            let fields = line.split(separator: "\t", omittingEmptySubsequences: false)
            guard fields.count == 5, fields[1].hasSuffix(" installed") else { continue }
            let depends = fields[4].split(whereSeparator: { $0 == "," || $0 == "|" }).compactMap { item in
                item.split(separator: " ").first.map { String($0.split(separator: ":")[0]) }
            }
            packages[String(fields[0])] = Package(depends: depends, essential: fields[2] == "yes" || fields[3] == "required")
        }
        return packages
    }

    static func closure(of roots: [String], in packages: [String: Package]) -> Set<String> {
        var seen = Set<String>()
        var queue = roots
        while let name = queue.popLast() {
            guard seen.insert(name).inserted else { continue }
            queue += packages[name]?.depends ?? []
        }
        return seen
    }

    /// The packages `scripts/install-deps` installs for `make test` (its `packages=(…)` line; not `--bench`).
    static func installDepsPackages() throws -> [String] {
        let script = try String(contentsOfFile: Paths.script("install-deps"), encoding: .utf8)
        let line = try #require(script.split(separator: "\n").first { $0.hasPrefix("packages=(") }, "no packages=(…) line in scripts/install-deps")
        return line.dropFirst("packages=(".count).prefix { $0 != ")" }.split(separator: " ").map(String.init)
    }
}
