import Crypto
import _CryptoExtras
import Foundation

/// Throwaway credentials for tests and demos, and the public halves the fake needs from key files.
public enum TestKeys {
    /// A fresh APNs-style signing key: the `.p8` contents (PKCS#8 PEM) a client signs
    /// with, and the public key PEM (`BEGIN PUBLIC KEY`) for ``APNsKey/publicKeyPEM``.
    public static func apnsKey() -> (pkcs8PEM: String, publicKeyPEM: String) {
        let key = P256.Signing.PrivateKey()
        return (key.pemRepresentation, key.publicKey.pemRepresentation)
    }

    /// A fresh RSA-2048 service-account key: the PKCS#8 PEM that goes in the JSON file's `private_key`, and the
    /// public key PEM for ``FakePushServer/Configuration/serviceAccountPublicKeyPEM``.
    public static func serviceAccountKey() -> (privatePEM: String, publicPEM: String) {
        do {
            let key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
            return (key.pkcs8PEMRepresentation, key.publicKey.pemRepresentation)
        } catch {
            fatalError("BoringSSL could not generate an RSA-2048 key: \(error)")
        }
    }

    /// The P-256 public key PEM for `pem`, which may hold the public key or the private key (a `.p8`).
    public static func p256PublicKeyPEM(from pem: String) throws -> String {
        if let key = try? P256.Signing.PublicKey(pemRepresentation: pem) { return key.pemRepresentation }
        do {
            return try P256.Signing.PrivateKey(pemRepresentation: pem).publicKey.pemRepresentation
        } catch {
            throw FakePushError.invalidConfiguration("not a P-256 public or private key PEM (\(error))")
        }
    }

    /// The RSA public key PEM for `contents`: a public key PEM, a private key PEM (PKCS#8 or PKCS#1), or a
    /// service-account JSON file (its `private_key`).
    public static func rsaPublicKeyPEM(from contents: String) throws -> String {
        var pem = contents
        if let object = try? JSONSerialization.jsonObject(with: Data(contents.utf8)) as? [String: Any],
           let privateKey = object["private_key"] as? String {
            pem = privateKey
        }
        if let key = try? _RSA.Signing.PublicKey(pemRepresentation: pem) { return key.pemRepresentation }
        do {
            return try _RSA.Signing.PrivateKey(pemRepresentation: pem).publicKey.pemRepresentation
        } catch {
            throw FakePushError.invalidConfiguration("not an RSA public key, private key or service-account file (\(error))")
        }
    }
}
