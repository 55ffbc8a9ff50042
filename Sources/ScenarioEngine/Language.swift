/// The languages messages are written in. Norwegian Bokmål is the default: the app's users are
/// Norwegian organizations.
public enum Language: String, Sendable, CaseIterable {
    case norwegianBokmal = "nb"
    case english = "en"

    /// The language for a user's locale setting, falling back to the organization's default, then Bokmål.
    /// Accepts BCP 47 and POSIX spellings: `nb`, `nb-NO`, `no`, `nn`, `en`, `en_GB`, …
    public static func resolve(_ userLocale: String?, organizationDefault: String?) -> Language {
        for candidate in [userLocale, organizationDefault] {
            guard let candidate, !candidate.isEmpty else { continue }
            let prefix = candidate.lowercased().prefix { $0.isLetter }
            switch prefix {
            case "nb", "no", "nn", "nob", "nor": return .norwegianBokmal
            case "en", "eng": return .english
            default: continue
            }
        }
        return .norwegianBokmal
    }
}
