import Foundation
import FakePush

/// A fake APNs + FCM + OAuth server on loopback, with everything a job needs to talk to it:
/// a test CA, an APNs `.p8` key, a service-account file, and the environment variables that point
/// the jobs there. All keys are made here, for this test only.
public final class PushEnvironment: @unchecked Sendable {
    public let server: FakePushServer
    public let directory: URL
    public let caFile: String
    public let apnsKeyFile: String
    public let apnsKeyPEM: String
    public let serviceAccountFile: String
    public let serviceAccountPrivateKeyPEM: String
    public static let keyID = "ABC123DEFG"
    public static let teamID = "DEF123GHIJ"
    public static let topic = "no.likeperson.app"
    public static let projectID = "demo-project"
    public static let clientEmail = "push@demo-project.iam.gserviceaccount.com"

    /// `ownCA`: its TLS certificate from a CA of its own, which no other environment's `caFile` trusts.
    public init(ownCA: Bool = false, configure: (inout FakePushServer.Configuration) -> Void = { _ in }) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("push-env-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let tls = try TestCertificates.make(in: directory, ownCA: ownCA)
        caFile = tls.caPEMPath
        let apns = TestCertificates.apnsKey()
        apnsKeyPEM = apns.pkcs8PEM
        apnsKeyFile = directory.appendingPathComponent("AuthKey_\(PushEnvironment.keyID).p8").path
        try apns.pkcs8PEM.write(toFile: apnsKeyFile, atomically: true, encoding: .utf8)
        let account = TestCertificates.serviceAccountKey()
        serviceAccountPrivateKeyPEM = account.privatePEM

        var configuration = FakePushServer.Configuration(
            certificateChainPEM: tls.certificatePEM, privateKeyPEM: tls.privateKeyPEM,
            apnsKeys: [APNsKey(keyID: PushEnvironment.keyID, teamID: PushEnvironment.teamID, publicKeyPEM: apns.publicKeyPEM)],
            apnsTopics: [PushEnvironment.topic], fcmProjectID: PushEnvironment.projectID,
            serviceAccountEmail: PushEnvironment.clientEmail, serviceAccountPublicKeyPEM: account.publicPEM)
        configuration.threads = 2
        // APNs and Google's services on ports of their own, as on the real hosts: a connection's stream limit is
        // its service's, whichever provider a job reached first.
        configuration.googlePort = 0
        configure(&configuration)
        server = try FakePushServer(configuration: configuration)
        try server.start()

        serviceAccountFile = directory.appendingPathComponent("service-account.json").path
        let json: [String: Any] = [
            "type": "service_account", "project_id": PushEnvironment.projectID, "private_key_id": "0123456789abcdef",
            "private_key": account.privatePEM, "client_email": PushEnvironment.clientEmail,
            "client_id": "1234567890", "token_uri": server.googleBaseURL + "/token",
        ]
        try JSONSerialization.data(withJSONObject: json, options: [.prettyPrinted]).write(to: URL(fileURLWithPath: serviceAccountFile))
    }

    deinit {
        server.stop()
        try? FileManager.default.removeItem(at: directory)
    }

    /// The environment variables that point a job at this fake.
    public var variables: [String: String] {
        [
            "APNS_KEY_FILE": apnsKeyFile, "APNS_KEY_ID": PushEnvironment.keyID, "APNS_TEAM_ID": PushEnvironment.teamID,
            "APNS_TOPIC": PushEnvironment.topic, "APNS_ENDPOINT": server.baseURL, "APNS_SANDBOX_ENDPOINT": server.baseURL,
            "FCM_SERVICE_ACCOUNT_FILE": serviceAccountFile, "FCM_ENDPOINT": server.googleBaseURL, "PUSH_CA_FILE": caFile,
        ]
    }
}
