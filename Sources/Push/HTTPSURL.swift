import Foundation

/// Where a request with our credentials may go: an https URL of a host, with a port from 1 to 65535 if any
/// (one out of range got past URL's parsing, and libcurl refused every request), no user or password, and no
/// fragment; a query only where `query` allows it. The endpoint settings and a service account's `token_uri`
/// are checked with it.
public enum HTTPSURL {
    public static func isUsable(_ text: String, query: Bool) -> Bool {
        guard let url = URLComponents(string: text), url.scheme == "https", !(url.host ?? "").isEmpty,
              url.user == nil, url.password == nil, url.fragment == nil, query || url.query == nil else { return false }
        return url.port.map { (1...65_535).contains($0) } ?? true
    }
}
