//! The parts of texfleet that the API and the scheduler share.
//!
//! Data flows one way: the API inserts jobs through [`db`], the scheduler claims them through
//! [`db`], compiles them, uploads through [`storage`] and records the outcome through [`db`].
//! Every SQL statement lives in [`db`] and every S3 call in [`storage`], so that a reader finds
//! the whole queue protocol and the whole storage layout each in one file.

pub mod cache_key;
pub mod config;
pub mod db;
pub mod digest;
pub mod metrics;
pub mod model;
pub mod network;
pub mod project_slots;
pub mod storage;
pub mod token;
pub mod validate;
pub mod webhook;

pub use config::Config;
