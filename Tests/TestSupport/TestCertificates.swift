import FakePush
import Foundation

/// Throwaway TLS and signing credentials for tests: a test CA with a server certificate for `localhost` and
/// 127.0.0.1 (made with the `openssl` command line), an APNs `.p8`-style key and a service-account RSA key.
public enum TestCertificates {
    private static let cache = CertificateCache()

    /// Writes the test CA to `directory/ca.pem` and returns its path with the server certificate and key (PEM).
    /// The CA and certificate are made once per process (openssl takes a moment) and shared by every call.
    /// `ownCA`: a CA of its own, made for this call (a host the other environments' CA files do not trust).
    public static func make(in directory: URL, ownCA: Bool = false) throws -> (caPEMPath: String, certificatePEM: String, privateKeyPEM: String) {
        let generated = ownCA ? try generate() : try cache.get()
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let caPath = directory.appendingPathComponent("ca.pem").path
        try generated.caPEM.write(toFile: caPath, atomically: true, encoding: .utf8)
        return (caPath, generated.certificatePEM, generated.privateKeyPEM)
    }

    /// A fresh APNs signing key: the `.p8` contents (PKCS#8 PEM) and its public key PEM.
    public static func apnsKey() -> (pkcs8PEM: String, publicKeyPEM: String) {
        TestKeys.apnsKey()
    }

    /// A fresh RSA-2048 service-account key: the PKCS#8 private key PEM and its public key PEM.
    public static func serviceAccountKey() -> (privatePEM: String, publicPEM: String) {
        TestKeys.serviceAccountKey()
    }

    fileprivate struct Generated: Sendable {
        var caPEM: String
        var certificatePEM: String
        var privateKeyPEM: String
    }

    /// Runs openssl to make a P-256 CA and a server certificate it signs (valid two days).
    fileprivate static func generate() throws -> Generated {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("test-ca-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        func path(_ name: String) -> String { directory.appendingPathComponent(name).path }
        func openssl(_ arguments: [String]) throws {
            let result = try ProcessRunner.run("/usr/bin/openssl", arguments, timeout: 60)
            guard result.status == 0 else {
                throw TestSetupError("openssl \(arguments.first ?? "") failed (\(result.status)): \(result.stderr)")
            }
        }
        try openssl(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                     "-keyout", path("ca-key.pem"), "-out", path("ca.pem"), "-days", "2",
                     "-subj", "/CN=mentor-push test CA",
                     "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"])
        try openssl(["req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                     "-keyout", path("server-key.pem"), "-out", path("server.csr"), "-subj", "/CN=localhost"])
        try """
            subjectAltName=DNS:localhost,IP:127.0.0.1
            basicConstraints=critical,CA:FALSE
            keyUsage=critical,digitalSignature
            extendedKeyUsage=serverAuth

            """.write(toFile: path("server.ext"), atomically: true, encoding: .utf8)
        try openssl(["x509", "-req", "-in", path("server.csr"), "-CA", path("ca.pem"), "-CAkey", path("ca-key.pem"),
                     "-CAcreateserial", "-out", path("server.pem"), "-days", "2", "-extfile", path("server.ext")])
        return Generated(caPEM: try String(contentsOfFile: path("ca.pem"), encoding: .utf8),
                         certificatePEM: try String(contentsOfFile: path("server.pem"), encoding: .utf8),
                         privateKeyPEM: try String(contentsOfFile: path("server-key.pem"), encoding: .utf8))
    }
}

/// Makes the certificates on first use, once, whichever thread asks first.
private final class CertificateCache: @unchecked Sendable {
    private let lock = NSLock()
    private var generated: TestCertificates.Generated?

    func get() throws -> TestCertificates.Generated {
        lock.lock()
        defer { lock.unlock() }
        if let generated { return generated }
        let made = try TestCertificates.generate()
        generated = made
        return made
    }
}
