/// A language messages are written in: a lowercase ISO 639 code (`nb`, `en`, or any other that has
/// templates in `message_templates`: a third language is rows there, not code). Norwegian Bokmål is the
/// default: the app's users are Norwegian organizations.
public struct Language: Sendable, Hashable, CustomStringConvertible {
    public let rawValue: String
    public init(_ code: String) { rawValue = code }
    public var description: String { rawValue }

    public static let norwegianBokmal = Language("nb")
    public static let english = Language("en")

    /// The language code of a locale setting in BCP 47 or POSIX spelling (`nb-NO`, `en_GB`, `se`), with
    /// Norwegian's other spellings read as Bokmål (`no`, `nn`, `nob`, `nor`) and `eng` as `en`.
    public static func code(of locale: String?) -> String? {
        guard let locale else { return nil }
        let prefix = locale.lowercased().prefix { $0.isLetter && $0.isASCII }
        switch prefix {
        case "": return nil
        case "nb", "no", "nn", "nob", "nor": return "nb"
        case "eng": return "en"
        default: return String(prefix)
        }
    }

    /// The language for a user's locale setting among those `available`, falling back to the
    /// organization's default, then Bokmål.
    public static func resolve(_ userLocale: String?, organizationDefault: String?, available: Set<String>) -> Language {
        for candidate in [userLocale, organizationDefault] {
            if let code = code(of: candidate), available.contains(code) { return Language(code) }
        }
        return .norwegianBokmal
    }
}
