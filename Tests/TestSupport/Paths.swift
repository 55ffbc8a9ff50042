import Foundation

/// Where things are: the checkout, its scripts, and the built executables.
public enum Paths {
    /// The package root (this file is Tests/TestSupport/Paths.swift).
    public static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    public static func script(_ name: String) -> String {
        root.appendingPathComponent("scripts").appendingPathComponent(name).path
    }

    /// A product built beside the test bundle (`.build/<triple>/debug/<name>`).
    public static func executable(_ name: String) -> String {
        let testBinary = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        var dir = testBinary.deletingLastPathComponent()
        // The test binary may sit inside `<name>.xctest/` on some platforms.
        if dir.pathExtension == "xctest" { dir = dir.deletingLastPathComponent() }
        let candidate = dir.appendingPathComponent(name).path
        if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        return root.appendingPathComponent(".build/debug").appendingPathComponent(name).path
    }
}
