//! JWT client assertions (`private_key_jwt`, RFC 7523 section 2.2): the client proves who it is
//! to an authorization server by signing a short-lived JWT with its private key instead of
//! sending a secret. Signed with ring (rustls's crypto provider, already in the tree): ES256 and
//! ES384 from a PKCS#8 EC key, RS256 (RSA PKCS#1 v1.5) from a PKCS#8 RSA key.
//!
//! Invariants: the key is read from PEM text once (when the configuration is resolved, so a bad
//! key is a configuration error naming the key) and never printed: [`Key`]'s `Debug` shows only
//! the algorithm. Every assertion is fresh: its own `jti`, issued now, valid for 5 minutes.

use agentloop_config::config::SigningAlg;
use base64::Engine;
use ring::rand::{SecureRandom, SystemRandom};
use ring::signature::{self, EcdsaKeyPair, RsaKeyPair};

/// A client's private key and the algorithm it signs with.
#[derive(Clone)]
pub struct Key {
    der: Vec<u8>,
    pub alg: SigningAlg,
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Key({})", alg_name(self.alg))
    }
}

/// The JOSE name of an algorithm.
pub fn alg_name(alg: SigningAlg) -> &'static str {
    match alg {
        SigningAlg::ES256 => "ES256",
        SigningAlg::ES384 => "ES384",
        SigningAlg::RS256 => "RS256",
    }
}

/// Why a key cannot be read or cannot sign: the text says which and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyError(pub String);

impl std::fmt::Display for KeyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for KeyError {}

impl From<&str> for KeyError {
    fn from(s: &str) -> Self {
        KeyError(s.to_string())
    }
}

const CONVERT: &str = "convert it with `openssl pkcs8 -topk8 -nocrypt -in KEY -out KEY.pk8`";

impl Key {
    /// The key of a PEM text (`-----BEGIN PRIVATE KEY-----`, PKCS#8), checked by signing once.
    pub fn from_pem(text: &str, alg: SigningAlg) -> Result<Key, KeyError> {
        let text = text.trim();
        if text.contains("BEGIN ENCRYPTED PRIVATE KEY") {
            return Err(KeyError(format!("the private key is encrypted; agentloop needs it unencrypted: {CONVERT}")));
        }
        if text.contains("BEGIN EC PRIVATE KEY") || text.contains("BEGIN RSA PRIVATE KEY") {
            return Err(KeyError(format!("the private key is not in PKCS#8 form (`BEGIN PRIVATE KEY`): {CONVERT}")));
        }
        let body = text
            .split_once("-----BEGIN PRIVATE KEY-----")
            .and_then(|(_, rest)| rest.split_once("-----END PRIVATE KEY-----"))
            .map(|(b, _)| b)
            .ok_or("the private key is not a PEM `-----BEGIN PRIVATE KEY-----` block")?;
        let b64: String = body.chars().filter(|c| !c.is_whitespace()).collect();
        let der = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .map_err(|_| KeyError::from("the private key's PEM block is not valid base64"))?;
        let key = Key { der, alg };
        key.sign(b"probe")?;
        Ok(key)
    }

    fn sign(&self, msg: &[u8]) -> Result<Vec<u8>, KeyError> {
        let rng = SystemRandom::new();
        let ec = |alg: &'static signature::EcdsaSigningAlgorithm, what: &str| {
            let kp = EcdsaKeyPair::from_pkcs8(alg, &self.der, &rng).map_err(|e| {
                KeyError(format!("the private key is not a {what} EC key ({e}), which {} needs", alg_name(self.alg)))
            })?;
            kp.sign(&rng, msg).map(|s| s.as_ref().to_vec()).map_err(|_| KeyError::from("signing failed"))
        };
        match self.alg {
            SigningAlg::ES256 => ec(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, "P-256"),
            SigningAlg::ES384 => ec(&signature::ECDSA_P384_SHA384_FIXED_SIGNING, "P-384"),
            SigningAlg::RS256 => {
                let kp = RsaKeyPair::from_pkcs8(&self.der)
                    .map_err(|e| KeyError(format!("the private key is not an RSA key ({e}), which RS256 needs")))?;
                let mut sig = vec![0; kp.public().modulus_len()];
                kp.sign(&signature::RSA_PKCS1_SHA256, &rng, msg, &mut sig)
                    .map_err(|_| KeyError::from("signing failed"))?;
                Ok(sig)
            }
        }
    }

    /// A fresh client assertion: `iss` = `sub` = the client id, `aud` = the authorization
    /// server (its issuer), a random `jti`, issued now and valid for 5 minutes.
    pub fn assertion(&self, client_id: &str, audience: &str) -> Result<String, KeyError> {
        let now =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or_default();
        let mut jti = [0u8; 16];
        SystemRandom::new().fill(&mut jti).map_err(|_| KeyError::from("no random numbers for the assertion's jti"))?;
        let jti: String = jti.iter().map(|b| format!("{b:02x}")).collect();
        let header = serde_json::json!({"alg": alg_name(self.alg), "typ": "JWT"});
        let claims = serde_json::json!({
            "iss": client_id, "sub": client_id, "aud": audience,
            "iat": now, "exp": now + 300, "jti": jti,
        });
        let b64 = |v: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v);
        let input = format!("{}.{}", b64(header.to_string().as_bytes()), b64(claims.to_string().as_bytes()));
        let sig = self.sign(input.as_bytes())?;
        Ok(format!("{input}.{}", b64(&sig)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_what_is_not_a_pkcs8_key_and_says_how_to_convert() {
        let e = Key::from_pem("-----BEGIN EC PRIVATE KEY-----\nAAAA\n-----END EC PRIVATE KEY-----", SigningAlg::ES256)
            .unwrap_err();
        assert!(e.0.contains("openssl pkcs8 -topk8"), "{e}");
        assert!(Key::from_pem("hello", SigningAlg::ES256).unwrap_err().0.contains("BEGIN PRIVATE KEY"));
    }

    #[test]
    fn signs_a_verifiable_es256_assertion() {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        let pem = format!(
            "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
            base64::engine::general_purpose::STANDARD.encode(pkcs8.as_ref())
        );
        let key = Key::from_pem(&pem, SigningAlg::ES256).unwrap();
        assert_eq!(format!("{key:?}"), "Key(ES256)");
        // A P-256 key cannot sign ES384: said when the key is read.
        assert!(Key::from_pem(&pem, SigningAlg::ES384).unwrap_err().0.contains("P-384"));
        let jwt = key.assertion("me", "https://as.example").unwrap();
        let parts: Vec<&str> = jwt.split('.').collect();
        let dec = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(s).unwrap();
        let claims: serde_json::Value = serde_json::from_slice(&dec(parts[1])).unwrap();
        assert_eq!((claims["iss"].as_str(), claims["sub"].as_str()), (Some("me"), Some("me")));
        assert_eq!(claims["aud"], "https://as.example");
        let kp = EcdsaKeyPair::from_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng).unwrap();
        let public = signature::UnparsedPublicKey::new(
            &signature::ECDSA_P256_SHA256_FIXED,
            ring::signature::KeyPair::public_key(&kp).as_ref(),
        );
        public.verify(format!("{}.{}", parts[0], parts[1]).as_bytes(), &dec(parts[2])).unwrap();
    }
}
