//! What the API and the delivery worker share about webhooks: endpoints and deliveries as
//! clients see them ([`model`]); the endpoints' secrets, kept
//! encrypted ([`secret`]); the Standard Webhooks signature ([`signature`]), which the worker
//! writes and the CLI checks; and which URLs an endpoint may have ([`target`]), checked at
//! registration and again at every delivery.

pub mod model;
pub mod secret;
pub mod signature;
pub mod target;
