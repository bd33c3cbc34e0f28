//! Endpoint secrets. A secret is 32 random bytes, shown to the client once as
//! `whsec_<base64>` (the Standard Webhooks form). The database holds it only encrypted with
//! AES-256-GCM under the operator's `webhook_secret_key`, which lives in the configuration of
//! the API and the schedulers, never in the database: a dump alone reveals no secret. The
//! endpoint's id is the associated data, so a ciphertext moved to another endpoint's row does
//! not decrypt.

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Nonce};
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use rand::RngCore;
use uuid::Uuid;

const NONCE_BYTES: usize = 12;
const PREFIX: &str = "whsec_";

/// The key that seals the secrets, from `webhook_secret_key` (base64 of 32 bytes).
#[derive(Clone)]
pub struct SecretBox(Aes256Gcm);

impl SecretBox {
    /// None when webhooks are not configured (an empty setting); an error when the setting is
    /// not 32 bytes of base64.
    pub fn from_setting(setting: &str) -> anyhow::Result<Option<SecretBox>> {
        if setting.trim().is_empty() {
            return Ok(None);
        }
        let key = BASE64
            .decode(setting.trim())
            .map_err(|_| anyhow::anyhow!("webhook_secret_key is not base64"))?;
        anyhow::ensure!(
            key.len() == 32,
            "webhook_secret_key must be 32 bytes in base64"
        );
        let cipher = Aes256Gcm::new_from_slice(&key).expect("a 32-byte key");
        Ok(Some(SecretBox(cipher)))
    }

    /// A new secret for `endpoint`: what the client is shown once, and what is stored.
    pub fn new_secret(&self, endpoint: Uuid) -> (String, Vec<u8>) {
        let mut secret = [0u8; 32];
        rand::thread_rng().fill_bytes(&mut secret);
        let mut nonce = [0u8; NONCE_BYTES];
        rand::thread_rng().fill_bytes(&mut nonce);
        let sealed = self
            .0
            .encrypt(
                Nonce::from_slice(&nonce),
                Payload {
                    msg: &secret,
                    aad: endpoint.as_bytes(),
                },
            )
            .expect("AES-GCM seals any message of this size");
        let mut stored = nonce.to_vec();
        stored.extend(sealed);
        (format!("{PREFIX}{}", BASE64.encode(secret)), stored)
    }

    /// The signing key of `endpoint` from what is stored, or None if it does not open (another
    /// key, another endpoint's row, or tampered bytes).
    pub fn open(&self, endpoint: Uuid, stored: &[u8]) -> Option<Vec<u8>> {
        if stored.len() <= NONCE_BYTES {
            return None;
        }
        let (nonce, sealed) = stored.split_at(NONCE_BYTES);
        self.0
            .decrypt(
                Nonce::from_slice(nonce),
                Payload {
                    msg: sealed,
                    aad: endpoint.as_bytes(),
                },
            )
            .ok()
    }
}

/// The signing key inside a `whsec_<base64>` secret, as a client holds it.
pub fn key_of(secret: &str) -> Option<Vec<u8>> {
    BASE64.decode(secret.trim().strip_prefix(PREFIX)?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_opens_only_for_its_endpoint_and_key() {
        let setting = BASE64.encode([7u8; 32]);
        let sealer = SecretBox::from_setting(&setting).unwrap().unwrap();
        let endpoint = Uuid::new_v4();
        let (shown, stored) = sealer.new_secret(endpoint);
        assert_eq!(sealer.open(endpoint, &stored), key_of(&shown));
        assert!(!stored
            .windows(32)
            .any(|w| Some(w.to_vec()) == key_of(&shown)));
        assert_eq!(sealer.open(Uuid::new_v4(), &stored), None);
        let other = SecretBox::from_setting(&BASE64.encode([8u8; 32]))
            .unwrap()
            .unwrap();
        assert_eq!(other.open(endpoint, &stored), None);
        assert!(SecretBox::from_setting("").unwrap().is_none());
        assert!(SecretBox::from_setting("c2hvcnQ=").is_err());
    }
}
