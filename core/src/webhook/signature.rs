//! The Standard Webhooks signature (v1): `webhook-signature: v1,<base64 of
//! HMAC-SHA256(key, "<webhook-id>.<webhook-timestamp>.<body>")>`, with the key being the
//! base64 part of the endpoint's secret. Verification compares in constant time (hmac's
//! `verify_slice`) and refuses timestamps too far from now, as the specification asks.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// How far a message's timestamp may be from now for [`verify`] (the specification's five
/// minutes).
pub const TOLERANCE_SECONDS: i64 = 5 * 60;

fn mac(key: &[u8], id: &str, timestamp: i64, body: &[u8]) -> HmacSha256 {
    let mut mac = HmacSha256::new_from_slice(key).expect("HMAC takes a key of any size");
    mac.update(format!("{id}.{timestamp}.").as_bytes());
    mac.update(body);
    mac
}

/// The `webhook-signature` header value of a message.
pub fn sign(key: &[u8], id: &str, timestamp: i64, body: &[u8]) -> String {
    let tag = mac(key, id, timestamp, body).finalize().into_bytes();
    format!("v1,{}", BASE64.encode(tag))
}

/// Whether `signatures` (the header: space-separated `v1,<base64>` entries) holds a valid
/// signature of the message under `key`, sent within [`TOLERANCE_SECONDS`] of `now`.
pub fn verify(
    key: &[u8],
    id: &str,
    timestamp: i64,
    body: &[u8],
    signatures: &str,
    now: i64,
) -> Result<(), &'static str> {
    if (now - timestamp).abs() > TOLERANCE_SECONDS {
        return Err("the timestamp is more than five minutes from now");
    }
    let valid = signatures
        .split_whitespace()
        .filter_map(|entry| entry.strip_prefix("v1,"))
        .filter_map(|encoded| BASE64.decode(encoded).ok())
        .any(|tag| mac(key, id, timestamp, body).verify_slice(&tag).is_ok());
    valid.then_some(()).ok_or("no v1 signature matches")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signs_as_the_specification_s_example() {
        // The example of the Standard Webhooks specification.
        let key = BASE64.decode("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let body = br#"{"test": 2432232314}"#;
        let signature = sign(&key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body);
        assert_eq!(signature, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
        let id = "msg_p5jXN8AQM9LWM0D4loKWxJek";
        assert!(verify(
            &key,
            id,
            1614265330,
            body,
            &format!("v2,x {signature}"),
            1614265331
        )
        .is_ok());
        assert!(verify(&key, id, 1614265330, b"{}", &signature, 1614265331).is_err());
        assert!(verify(&key, id, 1614265330, body, &signature, 1614265330 + 301).is_err());
    }
}
