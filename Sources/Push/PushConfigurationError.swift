/// A push setting is missing or malformed. The message names the variable (or flag) and the file,
/// never a key's contents.
public struct PushConfigurationError: Error, CustomStringConvertible, Sendable {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}
