import FakePush
import Foundation
import Testing
import TestSupport

/// `fake-push` the program, as an operator runs it to see what the jobs do when a provider fails.
@Suite struct CommandTests {
    /// A scratch folder holding the fake's certificate (`server.pem`) and key (`server.key`); the caller removes it.
    func serverFiles() throws -> (directory: URL, tls: (caPEMPath: String, certificatePEM: String, privateKeyPEM: String)) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("fake-push-command-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let tls = try TestCertificates.make(in: directory)
        try tls.certificatePEM.write(to: directory.appendingPathComponent("server.pem"), atomically: true, encoding: .utf8)
        try tls.privateKeyPEM.write(to: directory.appendingPathComponent("server.key"), atomically: true, encoding: .utf8)
        return (directory, tls)
    }

    /// `--fault` answers the next requests with a provider's failure, in order (it could be set only through the
    /// library, so trying a job against a failing provider by hand meant writing Swift).
    @Test func theProgramAnswersTheFaultsItWasGivenInOrder() throws {
        let (directory, tls) = try serverFiles()
        defer { try? FileManager.default.removeItem(at: directory) }
        let token = String(repeating: "ab", count: 32)
        // The fake on a port of its own choosing; four APNs requests on one connection; then SIGTERM.
        let script = """
            cd "$1" || exit 70
            "$2" --port 0 --cert server.pem --key server.key --fault '503=120*2@apns' --fault 500 --fault 'oauth-invalid-grant' >out 2>err &
            fake=$!
            i=0; until grep -q 'listening on' out; do i=$((i + 1)); [ $i -lt 100 ] || { kill $fake; exit 70; }; sleep 0.1; done
            url=$(sed -n 's/listening on //p' out)
            for n in 1 2 3 4; do
                [ $n = 1 ] || printf -- '--next\\n' >>curl.cfg
                printf -- '-s\\n--http2\\n--cacert "%s"\\n-o b%s\\n-D h%s\\n-w "%%{http_code}\\\\n"\\n--data-binary "{}"\\nurl = "%s/3/device/%s"\\n' "$3" $n $n "$url" "$4" >>curl.cfg
            done
            curl -K curl.cfg
            kill -TERM $fake; wait $fake
            cat err >&2
            """
        let result = try ProcessRunner.run("/bin/sh", ["-c", script, "sh", directory.path, Paths.executable("fake-push"), tls.caPEMPath, token], timeout: 60)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.split(separator: "\n") == ["503", "503", "500", "403"], "\(result.stdout)")
        let body = { (n: Int) in (try? String(contentsOf: directory.appendingPathComponent("b\(n)"), encoding: .utf8)) ?? "" }
        let headers = { (n: Int) in ((try? String(contentsOf: directory.appendingPathComponent("h\(n)"), encoding: .utf8)) ?? "").lowercased() }
        #expect(body(1) == #"{"reason":"ServiceUnavailable"}"#)
        #expect(headers(1).contains("retry-after: 120") && headers(2).contains("retry-after: 120"), "\(headers(1))")
        #expect(body(3) == #"{"reason":"InternalServerError"}"#)
        // The faults used up, the next is answered as APNs would (here: no provider token), and the OAuth fault
        // waits for a token request.
        #expect(body(4) == #"{"reason":"MissingProviderToken"}"#)
        #expect(result.stderr.contains("stopped after 4 requests"), "\(result.stderr)")
    }

    /// `--google-port` serves FCM and OAuth on a port of their own, as the real hosts are, and says where.
    @Test func googlesServicesCanHaveAPortOfTheirOwn() throws {
        let (directory, tls) = try serverFiles()
        defer { try? FileManager.default.removeItem(at: directory) }
        let script = """
            cd "$1" || exit 70
            "$2" --port 0 --google-port 0 --cert server.pem --key server.key >out 2>err &
            fake=$!
            i=0; until grep -q 'FCM and OAuth listening on' out; do i=$((i + 1)); [ $i -lt 100 ] || { kill $fake; exit 70; }; sleep 0.1; done
            apple=$(sed -n 's/^listening on //p' out)
            google=$(sed -n 's/^FCM and OAuth listening on //p' out)
            [ "$apple" != "$google" ] || { kill $fake; exit 71; }
            curl -s --http2 --cacert "$3" -o /dev/null -w '%{http_code} ' --data-binary '{}' "$google/v1/projects/demo-project/messages:send"
            curl -s --http2 --cacert "$3" -w ' %{http_code}' --data-binary '{}' "$apple/v1/projects/demo-project/messages:send"
            kill -TERM $fake; wait $fake
            """
        let result = try ProcessRunner.run("/bin/sh", ["-c", script, "sh", directory.path, Paths.executable("fake-push"), tls.caPEMPath], timeout: 60)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout == #"401 {"reason":"BadPath"} 404"#, "FCM on Google's port, APNs's answer on Apple's: \(result.stdout)")
        let same = try ProcessRunner.run(Paths.executable("fake-push"), ["--cert", "c", "--key", "k", "--port", "8443", "--google-port", "8443"])
        #expect(same.status == 64 && same.stderr.contains("--google-port must differ from --port"), "\(same.stderr)")
    }

    @Test(arguments: [
        ("503=120*5@apns", FaultSpec(fault: .status503(retryAfter: 120), count: 5, provider: .apns)),
        ("503", FaultSpec(fault: .status503(retryAfter: nil), count: 1, provider: nil)),
        ("429*3@fcm", FaultSpec(fault: .tooManyRequests(retryAfter: nil), count: 3, provider: .fcm)),
        ("slow=2.5", FaultSpec(fault: .slow(seconds: 2.5), count: 1, provider: nil)),
        ("goaway*2", FaultSpec(fault: .goaway, count: 2, provider: nil)),
        ("proxy-error-page", FaultSpec(fault: .proxyErrorPage(bytes: 1024), count: 1, provider: nil)),
        ("oauth-invalid-grant@oauth", FaultSpec(fault: .oauthInvalidGrant, count: 1, provider: .oauth)),
    ])
    func aFaultIsReadFromItsSpelling(text: String, expected: FaultSpec) throws {
        #expect(try FaultSpec.parse(text) == expected)
    }

    @Test(arguments: [
        ("bogus", "bogus is not a fault (faults: 500, 503"),
        ("", "no fault named"),
        ("503=soon", "503's value must be seconds from 0 to 86400"),
        ("500=1", "500 takes no value"),
        ("500*0", "the count after * must be a number from 1 to 1000000"),
        ("500@webpush", "@webpush is not a provider (apns, fcm or oauth)"),
        ("slow", "slow needs =<seconds>, from 0 to 600"),
        ("slow=nan", "slow needs =<seconds>, from 0 to 600"),
        // They used up a request answered as usual.
        ("oauth-invalid-grant@apns", "oauth-invalid-grant is no answer of apns"),
        ("413@oauth", "413 is no answer of oauth (the OAuth token endpoint)"),
    ])
    func aMisspelledFaultIsABadFlag(text: String, message: String) throws {
        let result = try ProcessRunner.run(Paths.executable("fake-push"), ["--cert", "/nonexistent/cert.pem", "--key", "/nonexistent/key.pem", "--fault", text])
        #expect(result.status == 64, "\(result.stderr)")
        #expect(result.stderr.contains("--fault \(text): \(message)"), "\(result.stderr)")
    }
}
