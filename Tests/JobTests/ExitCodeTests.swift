import Foundation
import Testing
import TestSupport

@Test func badFlagsExit64() throws {
    let result = try Jobs.run("inactivity-check", ["--format", "xml"], database: nil)
    #expect(result.status == 64)
}
