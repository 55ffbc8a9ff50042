/// A push setting is missing or malformed. The message names the variable (or flag) and the file,
/// never a key's contents.
public struct PushConfigurationError: Error, CustomStringConvertible, Sendable {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

extension PushConfigurationError {
    /// A file setting's value as a message may show it: the path, or, for a value that is no path (a key or a
    /// service account's JSON pasted in place of its file's path, a well-known habit), its length alone. The
    /// message goes to the journal, the JSON summary, `job_runs.error` and `why`.
    public static func shown(path value: String) -> String {
        // Shown only what looks like a path: absolute or explicitly relative, one line, of a path's length. A key
        // in base64 without its PEM armour ("MIGTAgEAMBMG…") has no mark to tell it by, so nothing else is.
        let pathLike = (value.hasPrefix("/") || value.hasPrefix("./") || value.hasPrefix("../")) && value.utf8.count <= 1024
            && !value.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F })
            && !value.contains("BEGIN") && !value.contains("PRIVATE") && !value.contains("{")
        guard !pathLike else { return value }
        return "(a value of \(value.utf8.count) bytes that is no absolute or ./ path, not shown: a key pasted in place of its file's path?)"
    }
}
